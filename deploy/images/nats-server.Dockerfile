FROM scratch
COPY nats-server /nats-server
ENTRYPOINT ["/nats-server"]
