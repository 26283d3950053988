FROM scratch
COPY etcd /etcd
ENTRYPOINT ["/etcd"]
