// The AI SDK's own check of a UIMessage list (safeValidateUIMessages), for the tests:
// reads the list as JSON on stdin and writes {success, data, error} as one line, where
// data is the list as the SDK parsed it (a field it does not know is dropped from it).
import { safeValidateUIMessages } from "ai";

const chunks = [];
for await (const chunk of process.stdin) chunks.push(chunk);
const messages = JSON.parse(Buffer.concat(chunks).toString("utf8"));
const result = await safeValidateUIMessages({ messages });
const error = result.success ? null : String(result.error && result.error.message ? result.error.message : result.error);
process.stdout.write(JSON.stringify({ success: result.success, data: result.data ?? null, error }) + "\n");
