/**
 * Calling PalmService/Analyze with @grpc/grpc-js over binary gRPC (HTTP/2 cleartext), with the
 * protobuf-es generated types from gen/ (no proto-loader needed).
 *
 *   PALM_API_KEY=palm_live_… node --import tsx examples/grpc-js-client.ts [image.jpg]
 *
 * Env: PALM_GRPC_TARGET (default localhost:8080), PALM_API_KEY (required).
 */
import { readFileSync } from "node:fs";
import * as grpc from "@grpc/grpc-js";
import { create, fromBinary, toBinary } from "@bufbuild/protobuf";
import {
  AnalyzeRequestSchema,
  AnalyzeResponseSchema,
  type AnalyzeRequest,
  type AnalyzeResponse,
} from "../gen/palm/v1/palm_pb.js";

const target = process.env.PALM_GRPC_TARGET ?? "localhost:8080";
const apiKey = process.env.PALM_API_KEY ?? "";
const imagePath = process.argv[2] ?? new URL("./sample-palm.jpg", import.meta.url).pathname;

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
      // err.details is the same message as the REST body; the google.rpc.ErrorInfo detail
      // (reason = the SPEC code) travels in the grpc-status-details-bin trailer.
      console.error(`error: ${grpc.status[err?.code ?? grpc.status.UNKNOWN]}: ${err?.details}`);
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
call.on("metadata", (md: grpc.Metadata) => {
  console.log(`quota: ${md.get("x-monthly-quota-remaining")[0]} of ${md.get("x-monthly-quota-limit")[0]} left`);
});
