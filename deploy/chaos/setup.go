package chaos

import (
	"context"
	"errors"
	"fmt"
	"os"
	"sync"

	clientv3 "go.etcd.io/etcd/client/v3"
	"k8s.io/apimachinery/pkg/runtime/schema"

	dc "github.com/kgate/kgate/deploy/dockercluster"
	"github.com/kgate/kgate/deploy/watchcheck"
	"github.com/kgate/kgate/storage/codec"
	"github.com/kgate/kgate/storage/registry"
)

// setup is what a run needs of the cluster: clients of every gateway, the
// empty workload namespace, etcd, and etcd's history of the namespace
// recorded from the start.
type setup struct {
	gws   *gateways
	cli   *clientv3.Client
	truth *watchcheck.Truth
	from  int64 // the revision the run starts after
	hist  *watchcheck.History

	stop      context.CancelFunc
	recording sync.WaitGroup
	recErr    error
	closeOnce sync.Once
}

// prepare makes the setup of a run on c; results is made too. With
// bridge, the clients reach the gateways on the cluster's network, not
// through their published ports. close ends the recording and returns
// its error.
func prepare(ctx context.Context, c *dc.Cluster, agent, results string, bridge bool) (_ *setup, err error) {
	if err := os.MkdirAll(results, 0o755); err != nil {
		return nil, fmt.Errorf("cannot make the results directory: %w", err)
	}
	s := &setup{hist: &watchcheck.History{}}
	addrs, config := c.GatewayAddrs(), c.RESTConfig
	if bridge {
		if addrs, err = c.GatewayBridgeAddrs(ctx); err != nil {
			return nil, err
		}
		config = c.BridgeRESTConfig
	}
	if s.gws, err = newGateways(addrs, config, agent); err != nil {
		return nil, err
	}
	if err := createNamespace(ctx, s.gws); err != nil {
		return nil, err
	}
	if s.cli, err = c.EtcdClient(); err != nil {
		return nil, err
	}
	defer func() {
		if err != nil {
			s.cli.Close()
		}
	}()
	if s.truth, err = newTruth(s.cli); err != nil {
		return nil, err
	}
	objs, from, err := s.truth.ConfigMaps(ctx, Namespace, 0)
	if err != nil {
		return nil, err
	}
	if len(objs) > 0 {
		return nil, fmt.Errorf("cannot run: namespace %s is not empty", Namespace)
	}
	s.from = from
	var rctx context.Context
	rctx, s.stop = context.WithCancel(ctx)
	s.recording.Go(func() { s.recErr = s.truth.Record(rctx, Namespace, from, s.hist) })
	return s, nil
}

// close stops recording etcd's history and closes the etcd client; it
// returns what ended the recording early, if anything did.
func (s *setup) close() error {
	s.closeOnce.Do(func() {
		s.stop()
		s.recording.Wait()
		s.cli.Close()
	})
	return s.recErr
}

func newTruth(cli *clientv3.Client) (*watchcheck.Truth, error) {
	reg, err := registry.NewBuiltin()
	if err != nil {
		return nil, fmt.Errorf("cannot make the registry: %w", err)
	}
	res, ok := reg.Lookup(schema.GroupVersionResource{Version: "v1", Resource: "configmaps"})
	if !ok {
		return nil, errors.New("no configmaps in the registry")
	}
	return &watchcheck.Truth{Etcd: cli, Codec: codec.New(reg.Scheme()), Resource: res}, nil
}
