/**
 * The standard `grpc.health.v1.Health` service: Check answers SERVING while the process serves
 * (NOT_SERVING once shutdown began, so load balancers drain it). Watch is not implemented.
 */
import type { ServiceImpl } from "@connectrpc/connect";
import { HealthCheckResponse_ServingStatus, type Health } from "../../gen/grpc/health/v1/health_pb.js";

/** GrpcHealthServiceOptions configure {@link createGrpcHealthService}. */
export interface GrpcHealthServiceOptions {
  /** Whether the server still serves. Default: always. */
  isServing?: () => boolean;
}

/** createGrpcHealthService returns the `grpc.health.v1.Health` implementation. */
export function createGrpcHealthService(options: GrpcHealthServiceOptions = {}): Partial<ServiceImpl<typeof Health>> {
  return {
    check() {
      const serving = options.isServing?.() ?? true;
      return {
        status: serving ? HealthCheckResponse_ServingStatus.SERVING : HealthCheckResponse_ServingStatus.NOT_SERVING,
      };
    },
  };
}
