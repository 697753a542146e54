/**
 * Calling PalmService/Analyze with @grpc/grpc-js over binary gRPC (HTTP/2 cleartext), with the
 * protobuf-es generated types from gen/ (no proto-loader needed).
 *
 *   PALM_API_KEY=palm_live_… node --import tsx examples/grpc-js-client.ts [image.jpg]
 *
 * Env: PALM_GRPC_TARGET (default localhost:8080), PALM_API_KEY (required: the key `npm start`
 * prints, or one from `palmctl keys create`).
 */
import { readFileSync } from "node:fs";
import * as grpc from "@grpc/grpc-js";
import { create, fromBinary, toBinary } from "@bufbuild/protobuf";
import { findTrailerError } from "@connectrpc/connect/protocol-grpc";
import { ErrorInfoSchema } from "../gen/google/rpc/error_details_pb.js";
import { AnalyzeRequestSchema, AnalyzeResponseSchema, type AnalyzeRequest, type AnalyzeResponse } from "../gen/palm/v1/palm_pb.js";

const target = process.env.PALM_GRPC_TARGET ?? "localhost:8080";
const apiKey = process.env.PALM_API_KEY ?? "";
const imagePath = process.argv[2] ?? new URL("./sample-palm.jpg", import.meta.url).pathname;

// Refuse a missing or placeholder key here, in one line, rather than send it.
if (!/^palm_live_[0-9a-f]{32}$/.test(apiKey)) {
  console.error("error: set PALM_API_KEY to the key `npm start` printed (palm_live_ and 32 hex characters)");
  process.exit(2);
}

/** printQuota prints the quota from response metadata: headers on success, trailers on errors. */
function printQuota(md: grpc.Metadata): void {
  const remaining = md.get("x-monthly-quota-remaining")[0];
  if (remaining !== undefined) console.log(`quota: ${remaining} of ${md.get("x-monthly-quota-limit")[0]} left`);
}

/** reasonOf reads the error table's code: the ErrorInfo in the grpc-status-details-bin trailer. */
function reasonOf(err: grpc.ServiceError): string {
  const h = new Headers({ "grpc-status": String(err.code), "grpc-message": encodeURIComponent(err.details) });
  const details = err.metadata.get("grpc-status-details-bin")[0];
  if (Buffer.isBuffer(details)) h.set("grpc-status-details-bin", details.toString("base64"));
  const reason = findTrailerError(h)?.findDetails(ErrorInfoSchema)[0]?.reason;
  return reason ?? grpc.status[err.code].toLowerCase();
}

const client = new grpc.Client(target, grpc.credentials.createInsecure(), {
  // The answer holds a full-size JPEG overlay and three PNG masks: for a 12-megapixel photo it
  // is larger than grpc-js's default 4 MB receive limit, so raise it (here to 64 MiB).
  "grpc.max_receive_message_length": 64 * 1024 * 1024,
  // Requests may carry up to 5 MiB of image (the default send limit is unlimited in grpc-js).
});

const metadata = new grpc.Metadata();
metadata.set("x-api-key", apiKey);

const call = client.makeUnaryRequest<AnalyzeRequest, AnalyzeResponse>(
  "/palm.v1.PalmService/Analyze",
  (req) => Buffer.from(toBinary(AnalyzeRequestSchema, req)),
  (bytes) => fromBinary(AnalyzeResponseSchema, bytes),
  create(AnalyzeRequestSchema, { image: readFileSync(imagePath) }),
  metadata,
  { deadline: Date.now() + 30_000 },
  (err, res) => {
    client.close();
    if (err || !res) {
      // An error comes back trailers-only: its quota and details are in the trailers.
      if (err) printQuota(err.metadata);
      console.error(err ? `error: ${reasonOf(err)}: ${err.details}` : "error: no response");
      process.exitCode = 1;
      return;
    }
    const stats = res.results?.stats;
    console.log(
      JSON.stringify(
        {
          id: res.id,
          object: res.object,
          model: res.model,
          overlay_bytes: res.results?.overlay.byteLength,
          detected: { heart: stats?.heart?.detected, head: stats?.head?.detected, life: stats?.life?.detected },
          usage: { used: Number(res.usage?.requestsUsed), limit: Number(res.usage?.requestsLimit), plan: res.usage?.plan },
        },
        null,
        2,
      ),
    );
  },
);
// Response headers (success): the quota of this call.
call.on("metadata", printQuota);
