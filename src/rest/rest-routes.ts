/**
 * The REST routing table, read from the `google.api.http` annotations of the generated service
 * descriptors: a new annotated RPC gets its REST path with no new transport code.
 * Supported: literal paths (no `{variable}` segments), `body: "*"` or a single field, or no body.
 */
import { getOption, hasOption, type DescMethodUnary, type DescService } from "@bufbuild/protobuf";
import { http } from "../../gen/google/api/annotations_pb.js";
import type { HttpRule } from "../../gen/google/api/http_pb.js";

/** RestRoute binds one HTTP method and path to one unary RPC. */
export interface RestRoute {
  /** Upper-case HTTP method. */
  readonly httpMethod: string;
  /** Literal path, e.g. "/v1/palm/analyze". */
  readonly path: string;
  /** "*" (whole JSON body is the request), a field name, or "" (no body). */
  readonly body: string;
  readonly method: DescMethodUnary;
}

/** RestTable maps path → HTTP method → route. */
export type RestTable = ReadonlyMap<string, ReadonlyMap<string, RestRoute>>;

/** restRoutesOf lists the annotated unary methods of `services`, additional bindings included. */
export function restRoutesOf(services: readonly DescService[]): RestRoute[] {
  const routes: RestRoute[] = [];
  for (const service of services) {
    for (const m of service.methods) {
      if (m.methodKind !== "unary" || !hasOption(m, http)) continue;
      const method = m as DescMethodUnary;
      const rule = getOption(method, http);
      for (const r of [rule, ...rule.additionalBindings]) {
        const route = routeOf(method, r);
        if (route) routes.push(route);
      }
    }
  }
  return routes;
}

/** createRestTable indexes routes by path and method; throws on a duplicate or templated path. */
export function createRestTable(routes: readonly RestRoute[]): RestTable {
  const table = new Map<string, Map<string, RestRoute>>();
  for (const route of routes) {
    if (route.path.includes("{")) {
      throw new Error(`REST path templates are not supported: ${route.path} (${route.method.parent.typeName}.${route.method.name})`);
    }
    const byMethod = table.get(route.path) ?? new Map<string, RestRoute>();
    if (byMethod.has(route.httpMethod)) throw new Error(`duplicate REST route ${route.httpMethod} ${route.path}`);
    byMethod.set(route.httpMethod, route);
    table.set(route.path, byMethod);
  }
  return table;
}

function routeOf(method: DescMethodUnary, rule: HttpRule): RestRoute | undefined {
  const p = rule.pattern;
  switch (p.case) {
    case "get":
    case "put":
    case "post":
    case "delete":
    case "patch":
      return { httpMethod: p.case.toUpperCase(), path: p.value, body: rule.body, method };
    case "custom":
      return { httpMethod: p.value.kind.toUpperCase(), path: p.value.path, body: rule.body, method };
    default:
      return undefined;
  }
}
