package main

import (
	"flag"

	"github.com/kgate/kgate/deploy/devcluster"
	"github.com/kgate/kgate/gateway"
)

// kubeletFlags are kube-apiserver's --kubelet-* flags (the kubelet
// proxies: pods/log, exec, attach, portforward, pods/proxy, nodes/proxy),
// taken by `kgate gateway` and `kgate dev`.
type kubeletFlags struct {
	cfg   gateway.KubeletConfig
	types listFlag
}

func addKubeletFlags(fs *flag.FlagSet) *kubeletFlags {
	k := &kubeletFlags{}
	c := &k.cfg
	fs.StringVar(&c.ClientCertFile, "kubelet-client-certificate", "", "client certificate presented to kubelets")
	fs.StringVar(&c.ClientKeyFile, "kubelet-client-key", "", "key of --kubelet-client-certificate")
	fs.StringVar(&c.CAFile, "kubelet-certificate-authority", "", "CA bundle verifying kubelets' serving certificates; unset, they are not verified (as kube-apiserver)")
	fs.Var(&k.types, "kubelet-preferred-address-types", "Node address types to reach kubelets by, in order (default Hostname,InternalDNS,InternalIP,ExternalDNS,ExternalIP)")
	fs.BoolVar(&c.AllowLoopbackTargets, "kubelet-allow-loopback-targets", false, "let the kubelet, node and pod proxies dial loopback and link-local addresses (development, tests); off, they are refused as kube-apiserver refuses them")
	fs.DurationVar(&c.MaxSession, "kubelet-max-session", 0, "bounds one proxied request, log stream or exec/attach/port-forward session (0: unbounded, as kube-apiserver)")
	return k
}

func (k *kubeletFlags) gateway(cfg *gateway.Config) {
	cfg.Kubelet = k.cfg
	cfg.Kubelet.PreferredAddressTypes = k.types
}

func (k *kubeletFlags) dev(cfg *devcluster.Config) {
	cfg.Kubelet = k.cfg
	cfg.Kubelet.PreferredAddressTypes = k.types
}
