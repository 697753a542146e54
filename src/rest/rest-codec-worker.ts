/**
 * Worker-thread entry of the REST codec (rest-codec.ts): JSON parsing, lenient base64 and
 * response serialisation of large REST bodies run here, not on the main thread.
 */
import type { DescMessage, MessageShape } from "@bufbuild/protobuf";
import { parentPort } from "node:worker_threads";
import { REST_SERVICES } from "./rest-services.js";
import { codecFailure, type CodecReply, type CodecRequest } from "./rest-codec-protocol.js";
import { decodeRestBody, encodeRestBody } from "./rest-json.js";

const port = parentPort;
if (!port) throw new Error("rest-codec-worker.ts must run in a worker thread");

const messages = new Map<string, DescMessage>();
for (const service of REST_SERVICES) {
  for (const method of service.methods) {
    messages.set(method.input.typeName, method.input);
    messages.set(method.output.typeName, method.output);
  }
}

port.on("message", (req: CodecRequest) => {
  let reply: CodecReply;
  try {
    const desc = messages.get(req.typeName);
    if (!desc) throw new Error(`unknown message type ${req.typeName}`);
    if (req.type === "decode") {
      reply = { id: req.id, ok: true, message: decodeRestBody(desc, req.bodyField, req.bytes) };
    } else {
      const body = encodeRestBody(desc, req.message as MessageShape<DescMessage>);
      // A private ArrayBuffer (Buffer.from may use a shared pool), transferred without a copy.
      const bytes = new Uint8Array(body.byteLength);
      bytes.set(body);
      port.postMessage({ id: req.id, ok: true, bytes } satisfies CodecReply, [bytes.buffer]);
      return;
    }
  } catch (e) {
    reply = { id: req.id, ok: false, failure: codecFailure(e) };
  }
  port.postMessage(reply);
});
