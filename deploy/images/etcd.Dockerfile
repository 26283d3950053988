FROM scratch
COPY etcd /etcd
# Not root: the chart's securityContext also sets runAsNonRoot and this ID.
USER 65532:65532
ENTRYPOINT ["/etcd"]
