/**
 * protoc-gen-openapi: our protoc plugin (run by `buf generate`, see buf.gen.yaml) writing the
 * OpenAPI 3.1 document of the REST surface to gen/openapi/openapi.json.
 *
 * Everything comes from the proto: the paths and methods from the `google.api.http` annotations
 * (the same ones src/rest/rest-routes.ts serves), the schemas from the messages as the REST
 * surface writes them (proto field names, 64-bit integers as JSON numbers, bytes as base64), the
 * descriptions from the proto comments. The error responses come from the error table
 * (src/errors.ts), the one place error codes are defined. Add a field or an annotated RPC, run
 * `npm run generate`, and the document follows; test/unit/openapi/openapi-document.spec.ts
 * validates it and checks it against the routes and the error table.
 *
 * Options (buf.gen.yaml `opt`): `title=…` (info.title), `public=pkg.Service.Method` (repeatable:
 * methods that need no API key).
 */
import { resolve } from "node:path";
import { pathToFileURL } from "node:url";
import {
  getOption,
  hasOption,
  ScalarType,
  type DescEnum,
  type DescExtension,
  type DescField,
  type DescMessage,
  type DescMethod,
  type DescService,
} from "@bufbuild/protobuf";
import { createEcmaScriptPlugin, getComments, runNodeJs, type Schema } from "@bufbuild/protoplugin";
import { Code } from "@connectrpc/connect";
import { ERRORS, type Reason } from "../src/errors.js";
import { UPLOAD_FIELD } from "../src/rest/rest-upload.js";

/** OpenApiOptions are the plugin's options. */
export interface OpenApiOptions {
  title: string;
  /** Fully qualified method names ("palm.v1.PalmService.Health") that need no key. */
  publicMethods: string[];
}

type JsonSchema = Record<string, unknown>;

const INT32 = new Set([ScalarType.INT32, ScalarType.UINT32, ScalarType.SINT32, ScalarType.FIXED32, ScalarType.SFIXED32]);
const INT64 = new Set([ScalarType.INT64, ScalarType.UINT64, ScalarType.SINT64, ScalarType.FIXED64, ScalarType.SFIXED64]);

/** Error codes that exist only where a key is checked (and so the store is asked). */
const KEYED: ReadonlySet<Reason> = new Set(["missing_api_key", "invalid_api_key", "quota_exceeded", "rate_limited", "store_unavailable"]);
/** Error codes no route answers as such: unknown paths, and a client that went away. */
const NOT_PER_ROUTE: ReadonlySet<Reason> = new Set(["not_found", "canceled"]);

function describe(desc: DescMessage | DescField | DescMethod | DescService | DescEnum): string | undefined {
  const text = getComments(desc).leading?.trim();
  return text ? text.replace(/\n /g, "\n") : undefined;
}

/** scalarSchema is a scalar field's JSON schema as the REST surface reads and writes it. */
function scalarSchema(t: ScalarType): JsonSchema {
  if (t === ScalarType.STRING) return { type: "string" };
  if (t === ScalarType.BOOL) return { type: "boolean" };
  if (t === ScalarType.BYTES) return { type: "string", contentEncoding: "base64" };
  if (t === ScalarType.FLOAT) return { type: "number", format: "float" };
  if (t === ScalarType.DOUBLE) return { type: "number", format: "double" };
  if (INT32.has(t)) return { type: "integer", format: t === ScalarType.UINT32 || t === ScalarType.FIXED32 ? "uint32" : "int32" };
  if (INT64.has(t)) return { type: "integer", format: "int64" }; // REST writes 64-bit integers as JSON numbers
  return {};
}

/** Well-known types keep protobuf's own JSON forms. */
function wellKnown(typeName: string): JsonSchema | undefined {
  switch (typeName) {
    case "google.protobuf.Timestamp":
      return { type: "string", format: "date-time" };
    case "google.protobuf.Duration":
      return { type: "string", pattern: "^-?[0-9]+(\\.[0-9]+)?s$" };
    case "google.protobuf.Struct":
      return { type: "object", additionalProperties: true };
    case "google.protobuf.Value":
      return {};
    case "google.protobuf.Empty":
      return { type: "object" };
    default:
      return undefined;
  }
}

/** buildOpenApi writes the document for the annotated methods of `services`. */
export function buildOpenApi(services: readonly DescService[], http: DescExtension, options: OpenApiOptions): Record<string, unknown> {
  const schemas: Record<string, JsonSchema> = {};
  const ref = (m: DescMessage, output: boolean): JsonSchema => {
    const wk = wellKnown(m.typeName);
    if (wk) return wk;
    if (!(m.typeName in schemas)) {
      schemas[m.typeName] = {}; // placeholder first: recursive messages
      schemas[m.typeName] = messageSchema(m, output);
    }
    return { $ref: `#/components/schemas/${m.typeName}` };
  };
  const enumSchema = (e: DescEnum): JsonSchema => ({
    type: "string",
    enum: e.values.map((v) => v.name),
    ...(describe(e) ? { description: describe(e) } : {}),
  });
  const fieldSchema = (f: DescField, output: boolean): JsonSchema => {
    const one = (): JsonSchema => {
      switch (f.fieldKind) {
        case "scalar":
          return scalarSchema(f.scalar);
        case "enum":
          return enumSchema(f.enum);
        case "message":
          return ref(f.message, output);
        case "list":
          return {
            type: "array",
            items: f.listKind === "scalar" ? scalarSchema(f.scalar) : f.listKind === "enum" ? enumSchema(f.enum) : ref(f.message, output),
          };
        case "map":
          return {
            type: "object",
            additionalProperties:
              f.mapKind === "scalar" ? scalarSchema(f.scalar) : f.mapKind === "enum" ? enumSchema(f.enum) : ref(f.message, output),
          };
      }
    };
    const s = one();
    const d = describe(f);
    // A $ref with siblings is allowed in OpenAPI 3.1 (JSON Schema 2020-12).
    return d ? { ...s, description: d } : s;
  };
  function messageSchema(m: DescMessage, output: boolean): JsonSchema {
    const properties: Record<string, JsonSchema> = {};
    const required: string[] = [];
    for (const f of m.fields) {
      properties[f.name] = fieldSchema(f, output);
      // Responses always carry fields without explicit presence (src/rest/rest-json.ts: alwaysEmitImplicit).
      if (output && f.fieldKind !== "message" && !f.oneof && f.presence !== 1 /* EXPLICIT */) required.push(f.name);
    }
    return {
      type: "object",
      ...(describe(m) ? { description: describe(m) } : {}),
      properties,
      ...(required.length > 0 ? { required } : {}),
    };
  }

  const quotaHeaders = {
    "X-Request-Id": { description: "The request's id (palm_ + ULID).", schema: { type: "string" } },
    "X-Monthly-Quota-Limit": { description: "Analyses allowed this month (requests with a recognised key).", schema: { type: "integer" } },
    "X-Monthly-Quota-Remaining": { description: "Analyses left this month.", schema: { type: "integer" } },
    "X-Monthly-Quota-Reset": { description: "Unix seconds: start of the next month (UTC).", schema: { type: "integer" } },
    "RateLimit-Policy": {
      description: 'The per-client rate (IETF httpapi draft): `"burst";q=<burst>;w=<seconds to earn the burst back>`.',
      schema: { type: "string" },
    },
    RateLimit: {
      description: 'The client\'s rate now: `"burst";r=<requests left at once>;t=<seconds until the burst is whole>`.',
      schema: { type: "string" },
    },
  };
  const rateLimitHeaders = { "RateLimit-Policy": quotaHeaders["RateLimit-Policy"], RateLimit: quotaHeaders.RateLimit };

  const reasons = Object.keys(ERRORS) as Reason[];
  const publicMethods = new Set(options.publicMethods);
  const paths: Record<string, Record<string, unknown>> = {};
  const tags: { name: string; description?: string }[] = [];
  for (const service of services) {
    const annotated = service.methods.filter((m) => m.methodKind === "unary" && hasOption(m, http));
    if (annotated.length === 0) continue;
    tags.push({ name: service.typeName, ...(describe(service) ? { description: describe(service) } : {}) });
    for (const method of annotated) {
      const rule = getOption(method, http) as unknown as HttpRuleShape;
      for (const r of [rule, ...rule.additionalBindings]) {
        const binding = bindingOf(r);
        if (!binding) continue;
        const keyed = !publicMethods.has(`${service.typeName}.${method.name}`);
        const hasBody = r.body !== "";
        const description = describe(method);
        const operation: Record<string, unknown> = {
          operationId: `${service.name}_${method.name}${r === rule ? "" : `_${binding.method}`}`,
          tags: [service.typeName],
          summary: description?.split("\n")[0],
          ...(description?.includes("\n") ? { description } : {}),
          "x-rpc": `/${service.typeName}/${method.name}`,
          security: keyed ? [{ ApiKey: [] }] : [],
          ...(r.body === "*" && queryParametersOf(method.input).length > 0 ? { parameters: queryParametersOf(method.input) } : {}),
          ...(hasBody
            ? {
                requestBody: {
                  required: true,
                  content: {
                    "application/json": {
                      schema:
                        r.body === "*" ? ref(method.input, false) : fieldSchema(method.input.fields.find((f) => f.name === r.body)!, false),
                    },
                    ...(r.body === "*" ? uploadContentOf(method.input) : {}),
                  },
                },
              }
            : {}),
          responses: responsesOf(ref(method.output, true), keyed, hasBody),
        };
        paths[binding.path] ??= {};
        paths[binding.path][binding.method] = operation;
      }
    }
  }

  schemas.ErrorCode = {
    type: "string",
    description: "The `code` of an error body; gRPC and Connect carry it as google.rpc.ErrorInfo.reason (domain palm.v1).",
    enum: reasons,
    "x-enum-descriptions": Object.fromEntries(reasons.map((r) => [r, ERRORS[r].message])),
  };
  schemas.Error = {
    type: "object",
    description: "Every REST error: the same body for every status.",
    properties: {
      error: {
        type: "object",
        properties: {
          code: { $ref: "#/components/schemas/ErrorCode" },
          message: { type: "string", description: "Client-safe message." },
          status: { type: "integer", description: "The HTTP status, repeated." },
          request_id: { type: "string", description: "Also the X-Request-Id header." },
        },
        required: ["code", "message", "status", "request_id"],
      },
    },
    required: ["error"],
  };

  /**
   * queryParametersOf: the request's option fields (string, bool, 32-bit integers) that the query
   * string may set for every body form (src/rest/rest-query.ts).
   */
  function queryParametersOf(input: DescMessage): Record<string, unknown>[] {
    const options = input.fields.filter(
      (f) => f.fieldKind === "scalar" && (f.scalar === ScalarType.STRING || f.scalar === ScalarType.BOOL || INT32.has(f.scalar)),
    );
    return options.map((f) => {
      const description = describe(f);
      return {
        name: f.name,
        in: "query",
        required: false,
        schema: fieldSchema(f, false),
        ...(description ? { description: `${description}\n\nAlso a field of the JSON body; the query wins.` } : {}),
      };
    });
  }

  /**
   * uploadContentOf: the binary bodies src/rest/rest-upload.ts takes for a request with a bytes
   * field `image`: a multipart form with that file part, or the file itself.
   */
  function uploadContentOf(input: DescMessage): Record<string, unknown> {
    const field = input.fields.find((f) => f.name === UPLOAD_FIELD);
    if (field?.fieldKind !== "scalar" || field.scalar !== ScalarType.BYTES) return {};
    const description = describe(field);
    return {
      "multipart/form-data": {
        schema: {
          type: "object",
          properties: {
            [UPLOAD_FIELD]: { type: "string", contentMediaType: "application/octet-stream", ...(description ? { description } : {}) },
          },
          required: [UPLOAD_FIELD],
        },
        encoding: { [UPLOAD_FIELD]: { contentType: "image/jpeg, image/png" } },
      },
      "image/jpeg": { schema: { type: "string", contentMediaType: "image/jpeg" } },
      "image/png": { schema: { type: "string", contentMediaType: "image/png" } },
    };
  }

  function responsesOf(output: JsonSchema, keyed: boolean, hasBody: boolean): Record<string, unknown> {
    const responses: Record<string, unknown> = {
      "200": {
        description: "Success.",
        headers: keyed ? quotaHeaders : { "X-Request-Id": quotaHeaders["X-Request-Id"] },
        content: { "application/json": { schema: output } },
      },
    };
    const byStatus = new Map<number, Reason[]>();
    for (const reason of reasons) {
      const spec = ERRORS[reason];
      if (NOT_PER_ROUTE.has(reason)) continue;
      if (!keyed && KEYED.has(reason)) continue;
      // Codes about the body or the image (400, 413, 415 and the engine's limits) need a body.
      const aboutBody = spec.code === Code.InvalidArgument || spec.httpStatus === 413 || reason === "overloaded" || reason === "timeout";
      if (!hasBody && aboutBody) continue;
      byStatus.set(spec.httpStatus, [...(byStatus.get(spec.httpStatus) ?? []), reason]);
    }
    for (const [status, codes] of [...byStatus].sort((a, b) => a[0] - b[0])) {
      responses[String(status)] = {
        description: codes.map((c) => `\`${c}\`: ${ERRORS[c].message}`).join("\n\n"),
        headers: {
          "X-Request-Id": quotaHeaders["X-Request-Id"],
          ...(status === 429 || status === 503 ? { "Retry-After": { schema: { type: "integer" } } } : {}),
          ...(codes.includes("rate_limited") ? rateLimitHeaders : {}),
        },
        content: { "application/json": { schema: { $ref: "#/components/schemas/Error" } } },
      };
    }
    return responses;
  }

  const rest = services.filter((s) => tags.some((t) => t.name === s.typeName));
  const pkg = rest[0]?.file.proto.package ?? "";
  return {
    openapi: "3.1.0",
    info: {
      title: options.title,
      version: pkg.split(".").pop() ?? "",
      description:
        `The REST surface of ${rest.map((s) => s.typeName).join(", ")}, generated from the proto by scripts/protoc-gen-openapi.ts. ` +
        "The same service answers gRPC, gRPC-Web and Connect on the same port.",
    },
    tags,
    paths,
    components: {
      securitySchemes: { ApiKey: { type: "apiKey", in: "header", name: "X-API-Key" } },
      schemas,
    },
  };
}

/** The parts of google.api.HttpRule read here (a runtime extension: no import of gen/). */
interface HttpRuleShape {
  pattern: { case: string | undefined; value: unknown };
  body: string;
  additionalBindings: HttpRuleShape[];
}

function bindingOf(r: HttpRuleShape): { method: string; path: string } | undefined {
  const p = r.pattern;
  if (p.case === "custom") {
    const v = p.value as { kind: string; path: string };
    return { method: v.kind.toLowerCase(), path: v.path };
  }
  if (p.case === "get" || p.case === "put" || p.case === "post" || p.case === "delete" || p.case === "patch") {
    return { method: p.case, path: p.value as string };
  }
  return undefined;
}

function parseOptions(raw: { key: string; value: string }[]): OpenApiOptions {
  const options: OpenApiOptions = { title: "API", publicMethods: [] };
  for (const { key, value } of raw) {
    if (key === "title") options.title = value;
    else if (key === "public") options.publicMethods.push(value);
    else throw new Error(`protoc-gen-openapi: unknown option ${JSON.stringify(key)}`);
  }
  return options;
}

function generate(schema: Schema<OpenApiOptions>): void {
  const http = schema.allFiles.flatMap((f) => f.extensions).find((e) => e.typeName === "google.api.http");
  if (!http) throw new Error("protoc-gen-openapi: google/api/annotations.proto is not imported by any file");
  const services = schema.files.flatMap((f) => f.services);
  const doc = buildOpenApi(services, http, schema.options);
  const f = schema.generateFile("openapi.json");
  f.print(JSON.stringify(doc, null, 2));
}

/** openApiPlugin is the plugin (exported for tests). */
export const openApiPlugin = createEcmaScriptPlugin<OpenApiOptions>({
  name: "protoc-gen-openapi",
  version: "v1",
  parseOptions,
  generateTs: generate,
});

if (process.argv[1] && import.meta.url === pathToFileURL(resolve(process.argv[1])).href) runNodeJs(openApiPlugin);
