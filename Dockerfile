# syntax=docker/dockerfile:1
# The service's image (docs/operations.md, "Container image"). Two stages: `build` installs every
# dependency, compiles dist/ and converts the hand models; the final stage holds Node, the
# production dependencies, dist/, the models, the demo page and the OpenAPI document, and runs
# as a non-root user. test/unit/deploy.spec.ts checks it against package.json and the manifests.
#
# NODE_IMAGE is Debian bookworm with Node.js 20 (the official image by default). Where no
# registry can be reached, build a local one first (deploy/local-base.sh) and pass
# --build-arg NODE_IMAGE=localhost/palm-node:20.
ARG NODE_IMAGE=docker.io/library/node:20-bookworm-slim

FROM ${NODE_IMAGE} AS build
WORKDIR /app
# No install scripts: onnxruntime-node's would download CUDA libraries (the CPU build ships in
# the package), and no other dependency needs one (package.json, allowScripts).
COPY package.json package-lock.json ./
RUN npm ci --ignore-scripts --no-audit --no-fund
COPY tsconfig.json tsconfig.build.json ./
COPY src ./src
COPY gen ./gen
COPY scripts ./scripts
COPY tools ./tools
COPY bin ./bin
COPY web ./web
COPY models ./models
# dist/ is compiled (src/, gen/ and the converter in tools/), the hand models are converted by the
# compiled converter from the installed @mediapipe/hands (nothing downloaded), and the dev
# dependencies are dropped.
RUN npm run build:hand-models && npm prune --omit=dev --ignore-scripts --no-audit --no-fund

FROM ${NODE_IMAGE}
ENV NODE_ENV=production \
    PORT=8080 \
    PALM_SHUTDOWN_GRACE_MS=20000
WORKDIR /app
COPY --from=build /app/package.json /app/package-lock.json ./
COPY --from=build /app/node_modules ./node_modules
COPY --from=build /app/dist ./dist
COPY --from=build /app/bin ./bin
COPY --from=build /app/web ./web
COPY --from=build /app/gen/openapi ./gen/openapi
COPY --from=build /app/models/palm-lines/palm-lines.onnx ./models/palm-lines/palm-lines.onnx
COPY --from=build /app/models/hands ./models/hands
# Files owned by root and read-only to the service's user.
USER 10001:10001
EXPOSE 8080
# Liveness: the process serves (no store, no workers needed); readiness is /v1/palm/ready.
HEALTHCHECK --interval=10s --timeout=3s --start-period=60s --retries=3 \
  CMD ["node", "-e", "fetch(`http://127.0.0.1:${process.env.PORT}/v1/palm/health`).then((r) => process.exit(r.ok ? 0 : 1), () => process.exit(1))"]
# The same command as `npm start` (package.json), without npm: SIGTERM reaches Node directly.
CMD ["node", "--initial-old-space-size=96", "dist/src/main.js"]
