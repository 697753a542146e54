/**
 * Calling PalmService/Analyze with a Connect client (connect-node). Swap createConnectTransport
 * for createGrpcTransport or createGrpcWebTransport to use those protocols on the same port.
 *
 *   PALM_API_KEY=palm_live_… node --import tsx examples/connect-client.ts [image.jpg]
 *
 * Env: PALM_URL (default http://localhost:8080), PALM_API_KEY (required: the key `npm start`
 * prints, or one from `palmctl keys create`).
 */
import { readFileSync } from "node:fs";
import { Code, ConnectError, createClient } from "@connectrpc/connect";
import { createConnectTransport } from "@connectrpc/connect-node";
import { ErrorInfoSchema } from "../gen/google/rpc/error_details_pb.js";
import { PalmService } from "../gen/palm/v1/palm_pb.js";

const baseUrl = process.env.PALM_URL ?? "http://localhost:8080";
const apiKey = process.env.PALM_API_KEY ?? "";
const imagePath = process.argv[2] ?? new URL("./sample-palm.jpg", import.meta.url).pathname;

// Refuse a missing or placeholder key here, in one line, rather than send it.
if (!/^palm_live_[0-9a-f]{32}$/.test(apiKey)) {
  console.error("error: set PALM_API_KEY to the key `npm start` printed (palm_live_ and 32 hex characters)");
  process.exit(2);
}

/** printQuota prints the quota headers (on success) or trailers (on errors), when present. */
function printQuota(h: Headers): void {
  if (h.has("x-monthly-quota-remaining")) {
    console.log(`quota: ${h.get("x-monthly-quota-remaining")} of ${h.get("x-monthly-quota-limit")} left`);
  }
}

const transport = createConnectTransport({
  baseUrl,
  httpVersion: "1.1",
  // Full-size overlay + masks: allow large answers (connect-node has no low default, but say so).
  readMaxBytes: 64 * 1024 * 1024,
});
const client = createClient(PalmService, transport);

try {
  const res = await client.analyze(
    { image: readFileSync(imagePath) },
    { headers: { "x-api-key": apiKey }, timeoutMs: 30_000, onHeader: printQuota },
  );
  const s = res.results?.stats;
  console.log(
    JSON.stringify(
      {
        id: res.id,
        object: res.object,
        model: res.model,
        detected: { heart: s?.heart?.detected, head: s?.head?.detected, life: s?.life?.detected },
        usage: { used: Number(res.usage?.requestsUsed), limit: Number(res.usage?.requestsLimit), plan: res.usage?.plan },
      },
      null,
      2,
    ),
  );
} catch (e) {
  const err = ConnectError.from(e);
  // An error's quota travels with its metadata (Connect: the response headers).
  printQuota(err.metadata);
  // The error table's code is the ErrorInfo reason; a Connect code name only for errors not ours.
  const reason = err.findDetails(ErrorInfoSchema)[0]?.reason ?? Code[err.code];
  console.error(`error: ${reason}: ${err.rawMessage}`);
  process.exitCode = 1;
}
