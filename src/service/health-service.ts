/**
 * The standard `grpc.health.v1.Health` service (https://github.com/grpc/grpc/blob/master/doc/health-checking.md):
 * - Check answers SERVING while the process serves and NOT_SERVING once shutdown began, so load
 *   balancers drain it; a service name other than "" (the whole server) or `palm.v1.PalmService`
 *   is NOT_FOUND.
 * - Watch sends the current status at once and again whenever it changes: at shutdown it sends
 *   NOT_SERVING and ends the stream, so that watchers learn of the drain and do not hold the
 *   shutdown up. An unknown service name gets SERVICE_UNKNOWN and an open stream, as the protocol
 *   asks. The stream ends when the client cancels.
 */
import { Code, ConnectError, type HandlerContext, type ServiceImpl } from "@connectrpc/connect";
import { ErrorInfoSchema } from "../../gen/google/rpc/error_details_pb.js";
import {
  HealthCheckResponse_ServingStatus as Status,
  type Health,
  type HealthCheckRequest,
  type HealthCheckResponse,
} from "../../gen/grpc/health/v1/health_pb.js";
import { PalmService } from "../../gen/palm/v1/palm_pb.js";
import { ERROR_DOMAIN } from "../errors.js";

/** HEALTH_SERVICES are the names Check and Watch know: the whole server and PalmService. */
export const HEALTH_SERVICES: ReadonlySet<string> = new Set(["", PalmService.typeName]);

/** GrpcHealthServiceOptions configure {@link createGrpcHealthService}. */
export interface GrpcHealthServiceOptions {
  /** Aborted when shutdown begins: from then on the server is NOT_SERVING. Default: never. */
  stopping?: AbortSignal;
}

type HealthStatus = Pick<HealthCheckResponse, "status">;

/** Resolves when any of the signals is aborted. */
function anyAborted(...signals: AbortSignal[]): Promise<void> {
  return new Promise((resolve) => {
    const done = () => {
      for (const s of signals) s.removeEventListener("abort", done);
      resolve();
    };
    for (const s of signals) {
      if (s.aborted) return done();
      s.addEventListener("abort", done);
    }
  });
}

/** createGrpcHealthService returns the `grpc.health.v1.Health` implementation. */
export function createGrpcHealthService(options: GrpcHealthServiceOptions = {}): ServiceImpl<typeof Health> {
  const stopping = options.stopping ?? new AbortController().signal;
  const status = () => (stopping.aborted ? Status.NOT_SERVING : Status.SERVING);
  return {
    check(req: HealthCheckRequest): HealthStatus {
      if (!HEALTH_SERVICES.has(req.service)) {
        throw new ConnectError("Unknown service.", Code.NotFound, undefined, [
          { desc: ErrorInfoSchema, value: { reason: "not_found", domain: ERROR_DOMAIN } },
        ]);
      }
      return { status: status() };
    },
    async *watch(req: HealthCheckRequest, ctx: HandlerContext): AsyncGenerator<HealthStatus> {
      if (!HEALTH_SERVICES.has(req.service)) {
        yield { status: Status.SERVICE_UNKNOWN };
        await anyAborted(ctx.signal, stopping);
        return;
      }
      yield { status: status() };
      if (stopping.aborted) return;
      await anyAborted(ctx.signal, stopping);
      if (!ctx.signal.aborted) yield { status: status() };
    },
  };
}
