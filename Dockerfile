# etcetera: an etcd-compatible key-value server. Build: `docker build -t etcetera .`
# Run one member: `docker run -p 2379:2379 etcetera --listen-client-urls http://0.0.0.0:2379 --advertise-client-urls http://localhost:2379`
# Three members: see docker-compose.yml.

# Build stage: dev dependencies (TypeScript) and the native better-sqlite3 addon need the full image.
FROM node:20-bookworm AS build
WORKDIR /app
COPY package.json package-lock.json ./
RUN npm ci
COPY tsconfig.json tsconfig.build.json ./
COPY proto ./proto
COPY src ./src
RUN npm run build && npm prune --omit=dev

# Runtime stage: the same Debian release, so the addon built above links against the same glibc.
FROM node:20-bookworm-slim
WORKDIR /app
ENV NODE_ENV=production
COPY --from=build /app/package.json ./package.json
COPY --from=build /app/node_modules ./node_modules
COPY --from=build /app/proto ./proto
COPY --from=build /app/dist ./dist
# Client and peer ports, as etcd's image.
EXPOSE 2379 2380
VOLUME ["/data"]
ENTRYPOINT ["node", "dist/server.js"]
