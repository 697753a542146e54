/**
 * `@grpc/grpc-js` as a plain binary gRPC client, with protobuf-es serializers (no proto-loader),
 * and the decoding of `grpc-status-details-bin` into Connect error details.
 */
import * as grpc from "@grpc/grpc-js";
import {
  fromBinary,
  toBinary,
  type DescMessage,
  type DescMethodUnary,
  type MessageInitShape,
  type MessageShape,
  create,
} from "@bufbuild/protobuf";
import type { ConnectError } from "@connectrpc/connect";
import { findTrailerError } from "@connectrpc/connect/protocol-grpc";

/** GrpcJsResult is everything a unary grpc-js call saw. */
export interface GrpcJsResult<O> {
  /** The response, or undefined on error. */
  message?: O;
  /** The error status, or undefined on success. */
  error?: grpc.ServiceError;
  /** Response headers (initial metadata). */
  header: grpc.Metadata;
  /** Trailers (status metadata). */
  trailer: grpc.Metadata;
  /** The error decoded with its details (grpc-status-details-bin), when there is one. */
  connectError?: ConnectError;
}

/** createGrpcJsClient makes a grpc-js client able to receive large responses (64 MiB). */
export function createGrpcJsClient(port: number): grpc.Client {
  return new grpc.Client(`127.0.0.1:${port}`, grpc.credentials.createInsecure(), {
    "grpc.max_receive_message_length": 64 * 1024 * 1024,
    "grpc.max_send_message_length": 16 * 1024 * 1024,
  });
}

/** callUnary calls `method` with grpc-js, binary protobuf on the wire. */
export function callUnary<I extends DescMessage, O extends DescMessage>(
  client: grpc.Client,
  method: DescMethodUnary<I, O>,
  input: MessageInitShape<I>,
  metadata: Record<string, string> = {},
  options: grpc.CallOptions = {},
): Promise<GrpcJsResult<MessageShape<O>>> {
  const md = new grpc.Metadata();
  for (const [k, v] of Object.entries(metadata)) md.set(k, v);
  const path = `/${method.parent.typeName}/${method.name}`;
  return new Promise((resolve) => {
    let header = new grpc.Metadata();
    const call = client.makeUnaryRequest(
      path,
      (m: MessageShape<I>) => Buffer.from(toBinary(method.input, m)),
      (b: Buffer) => fromBinary(method.output, b),
      create(method.input, input),
      md,
      options,
      (error, message) => {
        // The status (with trailers) arrives with the callback.
        setImmediate(() =>
          resolve({
            message: message ?? undefined,
            error: error ?? undefined,
            header,
            trailer: error?.metadata ?? trailer,
            connectError: error ? decodeGrpcError(error.metadata) : undefined,
          }),
        );
      },
    );
    let trailer = new grpc.Metadata();
    call.on("metadata", (m: grpc.Metadata) => (header = m));
    call.on("status", (s: grpc.StatusObject) => (trailer = s.metadata));
  });
}

/** decodeGrpcError reads grpc-status, grpc-message and grpc-status-details-bin from trailers. */
export function decodeGrpcError(trailer: grpc.Metadata): ConnectError | undefined {
  const h = new Headers();
  for (const [k, v] of Object.entries(trailer.getMap())) {
    h.set(k, Buffer.isBuffer(v) ? v.toString("base64") : v);
  }
  // grpc-js strips grpc-status/grpc-message from the metadata it hands out; the details carry them.
  if (!h.has("grpc-status")) h.set("grpc-status", "2");
  return findTrailerError(h);
}
