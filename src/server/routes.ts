/**
 * What the server serves, shared by the network adapter and the REST in-process client:
 * the routes, the public methods and the interceptor chain (one implementation for every protocol).
 */
import { createServiceImplSpec, type ConnectRouter, type Interceptor, type ServiceImplSpec } from "@connectrpc/connect";
import { Health } from "../../gen/grpc/health/v1/health_pb.js";
import { ServerReflection } from "../../gen/grpc/reflection/v1/reflection_pb.js";
import { PalmService } from "../../gen/palm/v1/palm_pb.js";
import { createApiKeyInterceptor } from "../auth/api-key-interceptor.js";
import { createQuotaInterceptor } from "../auth/quota-interceptor.js";
import type { Store } from "../auth/store.js";
import type { Config } from "../config.js";
import type { Analyzer } from "../inference/analyzer-types.js";
import type { Logger } from "../log.js";
import { createGrpcHealthService } from "../service/health-service.js";
import { createPalmService } from "../service/palm-service.js";
import { createReflectionService } from "../service/reflection-service.js";
import { createOutcomeInterceptor } from "./outcome-interceptor.js";

/** PUBLIC_METHODS need no API key: the liveness checks and server reflection (the schema is public). */
export const PUBLIC_METHODS = Object.freeze([
  PalmService.method.health,
  Health.method.check,
  Health.method.watch,
  ServerReflection.method.serverReflectionInfo,
]);

/** RoutesOptions configure {@link createRoutes}. */
export interface RoutesOptions {
  analyzer: Analyzer;
  config: Pick<Config, "analyzeTimeoutMs">;
  /** Aborted when shutdown begins (grpc.health.v1 answers NOT_SERVING from then on). */
  stopping?: AbortSignal;
}

/**
 * createServices returns the implementations of palm.v1.PalmService, grpc.health.v1.Health and
 * grpc.reflection.v1.ServerReflection: registered on connect's router for the RPC protocols and
 * invoked directly by REST, through the same interceptors.
 */
export function createServices(options: RoutesOptions): ServiceImplSpec[] {
  const palm = createPalmService({ analyzer: options.analyzer, analyzeTimeoutMs: options.config.analyzeTimeoutMs });
  const health = createGrpcHealthService({ stopping: options.stopping });
  const reflection = createReflectionService({ services: [PalmService, Health, ServerReflection] });
  return [
    createServiceImplSpec<typeof PalmService>(PalmService, palm),
    createServiceImplSpec<typeof Health>(Health, health),
    createServiceImplSpec<typeof ServerReflection>(ServerReflection, reflection),
  ];
}

/** registerServices puts `services` on a connect router. */
export function registerServices(services: readonly ServiceImplSpec[]): (router: ConnectRouter) => void {
  return (router) => {
    for (const s of services) for (const m of Object.values(s.methods)) router.rpc(m.method, m.impl as never);
  };
}

/** createRoutes registers palm.v1.PalmService, grpc.health.v1.Health and grpc.reflection.v1.ServerReflection. */
export function createRoutes(options: RoutesOptions): (router: ConnectRouter) => void {
  return registerServices(createServices(options));
}

/** InterceptorsOptions configure {@link createInterceptors}. */
export interface InterceptorsOptions {
  store: Store;
  config: Pick<Config, "planLimits" | "quotaLeaseMs">;
  logger: Logger;
  /** Clock for quota periods (tests). */
  now?: () => Date;
}

/** createInterceptors returns the chain, outermost first: outcome (request id, errors), API key, quota (one chain for every protocol). */
export function createInterceptors(options: InterceptorsOptions): Interceptor[] {
  return [
    createOutcomeInterceptor(),
    createApiKeyInterceptor({ store: options.store, publicMethods: PUBLIC_METHODS }),
    createQuotaInterceptor({
      store: options.store,
      planLimits: options.config.planLimits,
      leaseMs: options.config.quotaLeaseMs,
      logger: options.logger,
      now: options.now,
    }),
  ];
}
