"""The manual's webhook tool kind (docs/extending.md, "A new tool kind"), registered on
import: what a worker (or the replay gate) loads with ``--tools`` to know it."""

from tests.support.docs_page import run_page_block

run_page_block("## A new tool kind")
