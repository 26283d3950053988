package storage

import (
	"context"
	"errors"
	"testing"

	"go.etcd.io/etcd/api/v3/v3rpc/rpctypes"
)

func TestRetryNoLeader(t *testing.T) {
	other := errors.New("boom")
	for _, tc := range []struct {
		name    string
		errs    []error // what each call returns, then nil
		calls   int
		wantErr error
	}{
		{name: "ok at once", calls: 1},
		{name: "no leader twice, then a member with one", errs: []error{rpctypes.ErrNoLeader, rpctypes.ErrNoLeader}, calls: 3},
		{name: "no leader every time", errs: []error{rpctypes.ErrNoLeader, rpctypes.ErrNoLeader, rpctypes.ErrNoLeader, rpctypes.ErrNoLeader, rpctypes.ErrNoLeader}, calls: noLeaderRetries, wantErr: rpctypes.ErrNoLeader},
		{name: "other errors are not retried: the write may have been proposed", errs: []error{rpctypes.ErrTimeout}, calls: 1, wantErr: rpctypes.ErrTimeout},
		{name: "plain error", errs: []error{other}, calls: 1, wantErr: other},
	} {
		t.Run(tc.name, func(t *testing.T) {
			n := 0
			_, err := retry(context.Background(), func() (int, error) {
				n++
				if n <= len(tc.errs) {
					return 0, tc.errs[n-1]
				}
				return 1, nil
			})
			if n != tc.calls || !errors.Is(err, tc.wantErr) || (tc.wantErr == nil && err != nil) {
				t.Errorf("%d calls, err %v; want %d calls, err %v", n, err, tc.calls, tc.wantErr)
			}
		})
	}
}
