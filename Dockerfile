# Switchboard: one image for the API, telephony endpoints, media sockets and webhook sender.
FROM node:20-bookworm-slim
WORKDIR /app
ENV NODE_ENV=production
COPY package.json package-lock.json ./
RUN npm ci --omit=dev --no-audit --no-fund
COPY tsconfig.json ./
COPY engine ./engine
COPY src ./src
ENV HOST=0.0.0.0 PORT=3000 DATA_DIR=/data
RUN mkdir -p /data && chown node:node /data
EXPOSE 3000
USER node
CMD ["node", "--import", "tsx", "src/main.ts"]
