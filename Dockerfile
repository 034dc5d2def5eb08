# Switchboard: one image for the API, telephony endpoints, media sockets and webhook sender.
#   docker build -t switchboard .
#   docker run --init --stop-timeout 45 -p 3000:3000 -v switchboard-data:/data switchboard  (embedded database)
# The code runs compiled (dist/, built in the build stage) with plain node.
# With PostgreSQL and Redis: docker-compose.yml; see README, "Running in production".

# The Node.js major both stages use; the runtime must be the one the dependencies were installed on.
ARG NODE_VERSION=20

# --- build: the TypeScript compiled to dist/ (all dependencies, then tsc; see scripts/build.mjs) --------
FROM node:${NODE_VERSION}-bookworm-slim AS build
WORKDIR /app
COPY package.json package-lock.json ./
# --ignore-scripts: `prepare` would build before the sources are here; tsc needs no install script
RUN --mount=type=cache,target=/root/.npm \
    npm install --ignore-scripts --no-audit --no-fund --no-update-notifier
COPY tsconfig.json tsconfig.build.json ./
COPY scripts ./scripts
COPY engine ./engine
COPY src ./src
RUN node scripts/build.mjs

# --- deps: production dependencies only ----------------------------------------------------------
FROM node:${NODE_VERSION}-bookworm-slim AS deps
WORKDIR /app
COPY package.json package-lock.json ./
# scripts/: `prepare` (scripts/build.mjs) is skipped here (--ignore-scripts), and would build nothing without TypeScript
COPY scripts ./scripts
# `npm install` against the lock, not `npm ci`: the lock lacks other platforms' optional packages
# (e.g. @msgpackr-extract/*-darwin-*), which npm 11's `npm ci` refuses as out of sync, while
# `npm install` installs the locked versions with any npm (the same reason as in .ci/run).
# --ignore-scripts: no dependency needs its install script here (onnxruntime-node's fetches GPU
# builds from the network, and its package carries the CPU build; package.json's allowScripts
# denies it for npm 11, and the image's npm 10 does not read allowScripts), and `prepare` builds
# nothing in this stage.
RUN --mount=type=cache,target=/root/.npm \
    npm install --omit=dev --ignore-scripts --no-audit --no-fund --no-update-notifier

# --- runtime -------------------------------------------------------------------------------------
FROM node:${NODE_VERSION}-bookworm-slim AS runtime
LABEL org.opencontainers.image.title="Switchboard" \
      org.opencontainers.image.description="Self-hostable runtime for AI voice assistants on phone calls" \
      org.opencontainers.image.licenses="Apache-2.0"
ENV NODE_ENV=production \
    HOST=0.0.0.0 \
    PORT=3000 \
    DATA_DIR=/data
WORKDIR /app
# code and dependencies stay root-owned: the app (user node) can read them, not change them
COPY --from=deps /app/node_modules ./node_modules
COPY --from=build /app/dist ./dist
COPY package.json ./
# the background clips calls play (speech_config.background_audio)
COPY assets ./assets
# the embedded database's folder and recordings; unused by the database when DATABASE_URL is set
RUN mkdir -p /data && chown node:node /data
VOLUME /data
USER node
EXPOSE 3000 5060/udp 5060/tcp
# main.ts ends live calls within SHUTDOWN_GRACE_SECONDS (default 30) of SIGTERM, and exits by
# force 5 s after that: give `docker stop -t` / compose's stop_grace_period more than both
STOPSIGNAL SIGTERM
# liveness only (/readyz also asks the database); Node's fetch, since the slim image has no curl
HEALTHCHECK --interval=15s --timeout=5s --start-period=60s --retries=3 \
  CMD ["node", "-e", "fetch('http://127.0.0.1:' + (process.env.PORT || 3000) + '/healthz', { signal: AbortSignal.timeout(4000) }).then((r) => process.exit(r.ok ? 0 : 1), () => process.exit(1))"]
CMD ["node", "--enable-source-maps", "--initial-old-space-size=256", "dist/src/main.js"]
