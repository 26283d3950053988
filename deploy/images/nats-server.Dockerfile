FROM scratch
COPY nats-server /nats-server
# Not root: the chart's securityContext also sets runAsNonRoot and this ID.
USER 65532:65532
ENTRYPOINT ["/nats-server"]
