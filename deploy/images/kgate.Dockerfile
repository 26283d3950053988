FROM scratch
COPY kgate /kgate
ENTRYPOINT ["/kgate"]
