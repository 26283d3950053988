package cachenode_test

import (
	"encoding/json"

	clientv3 "go.etcd.io/etcd/client/v3"
)

func clientv3OpPut(key string, value []byte) clientv3.Op { return clientv3.OpPut(key, string(value)) }

func jsonDecode(b []byte, v any) error { return json.Unmarshal(b, v) }
