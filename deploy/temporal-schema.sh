#!/bin/sh
# Creates Temporal's two PostgreSQL databases and brings their schemas to the version
# the server image expects. Safe to run again: existing databases are kept and only
# missing schema versions are applied.
set -eu
schemas=/etc/temporal/schema/postgresql/v12
for db in temporal temporal_visibility; do
  temporal-sql-tool --db "$db" create-database 2>/dev/null || echo "database $db exists"
done
temporal-sql-tool --db temporal setup-schema -v 0.0
temporal-sql-tool --db temporal update-schema -d "$schemas/temporal/versioned"
temporal-sql-tool --db temporal_visibility setup-schema -v 0.0
temporal-sql-tool --db temporal_visibility update-schema -d "$schemas/visibility/versioned"
