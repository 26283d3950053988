{{/* Labels every object of the release carries. */}}
{{- define "kgate.labels" -}}
app.kubernetes.io/instance: {{ .Release.Name }}
app.kubernetes.io/managed-by: {{ .Release.Service }}
helm.sh/chart: {{ printf "%s-%s" .Chart.Name .Chart.Version }}
{{- end }}

{{/* Selector labels of one component: (list $ "kgate-gateway"). */}}
{{- define "kgate.selector" -}}
{{- $root := index . 0 -}}
app.kubernetes.io/name: {{ index . 1 }}
app.kubernetes.io/instance: {{ $root.Release.Name }}
{{- end }}

{{/* Labels of a component's objects: its selector and the release's. (list $ "kgate-gateway") */}}
{{- define "kgate.componentLabels" -}}
{{- $root := index . 0 -}}
{{ include "kgate.selector" . }}
app.kubernetes.io/managed-by: {{ $root.Release.Service }}
helm.sh/chart: {{ printf "%s-%s" $root.Chart.Name $root.Chart.Version }}
{{- end }}

{{/* Labels selecting the pods that are members of the gossip cluster (pod templates add part-of beside their selector). */}}
{{- define "kgate.memberLabels" -}}
app.kubernetes.io/part-of: kgate
app.kubernetes.io/instance: {{ .Release.Name }}
{{- end }}

{{- define "kgate.image" -}}
{{ .Values.image.repository }}:{{ .Values.image.tag }}
{{- end }}

{{/* etcd client URLs: the release's etcd, or etcd.endpoints. */}}
{{- define "kgate.etcdServers" -}}
{{- if .Values.etcd.enabled -}}
{{- $ns := .Release.Namespace -}}
{{- $urls := list -}}
{{- range $i := until (int .Values.etcd.replicas) -}}
{{- $urls = append $urls (printf "http://etcd-%d.etcd.%s.svc:2379" $i $ns) -}}
{{- end -}}
{{- join "," $urls -}}
{{- else -}}
{{- required "etcd.endpoints is required when etcd.enabled is false" (join "," .Values.etcd.endpoints) -}}
{{- end -}}
{{- end }}

{{- define "kgate.natsURL" -}}
{{- if .Values.nats.enabled -}}
nats://nats.{{ .Release.Namespace }}.svc:4222
{{- else -}}
{{- required "nats.url is required when nats.enabled is false" .Values.nats.url -}}
{{- end -}}
{{- end }}

{{/*
GOMEMLIMIT from a memory limit: goMemLimitPercent of it, in MiB.
(list $ "8Gi") -> "7372MiB". Quantities: plain bytes, k, M, G, T, Ki, Mi, Gi, Ti.
*/}}
{{- define "kgate.goMemLimit" -}}
{{- $root := index . 0 -}}
{{- $q := toString (index . 1) -}}
{{- $n := regexFind "^[0-9]+" $q -}}
{{- if not $n -}}{{- fail (printf "cannot derive GOMEMLIMIT from memory limit %q" $q) -}}{{- end -}}
{{- $unit := trimPrefix $n $q -}}
{{- $mult := dict "" 1 "k" 1000 "M" 1000000 "G" 1000000000 "T" 1000000000000 "Ki" 1024 "Mi" 1048576 "Gi" 1073741824 "Ti" 1099511627776 -}}
{{- if not (hasKey $mult $unit) -}}{{- fail (printf "cannot derive GOMEMLIMIT from memory limit %q" $q) -}}{{- end -}}
{{- $bytes := mul (int64 $n) (get $mult $unit) -}}
{{- printf "%dMiB" (div (div (mul $bytes (int64 $root.Values.goMemLimitPercent)) 100) 1048576) -}}
{{- end }}

{{/* The env of kgate's containers: pod name and IP, GOMEMLIMIT. (list $ .Values.gateway) */}}
{{- define "kgate.env" -}}
{{- $root := index . 0 -}}
{{- $c := index . 1 -}}
- name: POD_NAME
  valueFrom: {fieldRef: {fieldPath: metadata.name}}
- name: POD_IP
  valueFrom: {fieldRef: {fieldPath: status.podIP}}
{{- with $c.resources.limits }}{{ with .memory }}
- name: GOMEMLIMIT
  value: {{ include "kgate.goMemLimit" (list $root .) | quote }}
{{- end }}{{ end }}
{{- end }}

{{/* Flags and mounts both roles take: backends, internal TLS, NATS credentials. (list $ "gateway") */}}
{{- define "kgate.backendArgs" -}}
{{- $root := index . 0 -}}
- --etcd-servers={{ include "kgate.etcdServers" $root }}
- --nats-url={{ include "kgate.natsURL" $root }}
- --log-level={{ $root.Values.logLevel }}
{{- if kindIs "string" $root.Values.rangeSplits }}
- --range-splits={{ $root.Values.rangeSplits }}
{{- end }}
- --cluster-bind-address=0.0.0.0:7946
- --cluster-advertise-address=$(POD_IP)
- --join=kgate-gossip.{{ $root.Release.Namespace }}.svc:7946
{{- if $root.Values.etcd.tls.enabled }}
- --etcd-cafile=/etc/kgate/etcd/ca.crt
- --etcd-certfile=/etc/kgate/etcd/tls.crt
- --etcd-keyfile=/etc/kgate/etcd/tls.key
{{- end }}
{{- if $root.Values.internalTLS.enabled }}
- --internal-ca-file=/etc/kgate/internal/ca.crt
- --internal-cert-file=/etc/kgate/internal/tls.crt
- --internal-key-file=/etc/kgate/internal/tls.key
- --cluster-key-file=/etc/kgate/cluster-key/key
- --nats-credentials-file=/etc/kgate/nats/nats.creds
{{- else }}
{{- /* The roles refuse a plaintext internal plane unless told. */}}
- --insecure-internal
{{- end }}
{{- end }}

{{- define "kgate.backendMounts" -}}
{{- $root := index . 0 -}}
- {name: tmp, mountPath: /tmp}
{{- if $root.Values.etcd.tls.enabled }}
- {name: etcd-client, mountPath: /etc/kgate/etcd, readOnly: true}
{{- end }}
{{- if $root.Values.internalTLS.enabled }}
- {name: nats-creds, mountPath: /etc/kgate/nats, readOnly: true}
{{- end }}
{{- if $root.Values.internalTLS.enabled }}
- {name: internal-tls, mountPath: /etc/kgate/internal, readOnly: true}
- {name: cluster-key, mountPath: /etc/kgate/cluster-key, readOnly: true}
{{- end }}
{{- end }}

{{- define "kgate.backendVolumes" -}}
{{- $root := index . 0 -}}
{{- $role := index . 1 -}}
- name: tmp
  emptyDir: {sizeLimit: 64Mi}
{{- if $root.Values.etcd.tls.enabled }}
- name: etcd-client
  secret: {secretName: {{ $root.Values.etcd.tls.secretName }}}
{{- end }}
{{- if $root.Values.internalTLS.enabled }}
- name: nats-creds
  secret: {secretName: {{ index $root.Values.nats.credentials (printf "%sSecretName" $role) }}}
{{- end }}
{{- if $root.Values.internalTLS.enabled }}
- name: internal-tls
  secret: {secretName: {{ index $root.Values.internalTLS (printf "%sSecretName" $role) }}}
- name: cluster-key
  secret: {secretName: {{ $root.Values.internalTLS.clusterKeySecretName }}}
{{- end }}
{{- end }}

{{/* Spread of a component's pods over zones and nodes. (list $ "kgate-gateway" "required") */}}
{{- define "kgate.spread" -}}
{{- $root := index . 0 -}}
{{- $name := index . 1 -}}
{{- $anti := index . 2 -}}
topologySpreadConstraints:
- maxSkew: 1
  topologyKey: topology.kubernetes.io/zone
  whenUnsatisfiable: ScheduleAnyway
  labelSelector:
    matchLabels:
      {{- include "kgate.selector" (list $root $name) | nindent 6 }}
- maxSkew: 1
  topologyKey: kubernetes.io/hostname
  whenUnsatisfiable: ScheduleAnyway
  labelSelector:
    matchLabels:
      {{- include "kgate.selector" (list $root $name) | nindent 6 }}
affinity:
  podAntiAffinity:
{{- if eq $anti "required" }}
    requiredDuringSchedulingIgnoredDuringExecution:
    - topologyKey: kubernetes.io/hostname
      labelSelector:
        matchLabels:
          {{- include "kgate.selector" (list $root $name) | nindent 10 }}
{{- else }}
    preferredDuringSchedulingIgnoredDuringExecution:
    - weight: 100
      podAffinityTerm:
        topologyKey: kubernetes.io/hostname
        labelSelector:
          matchLabels:
            {{- include "kgate.selector" (list $root $name) | nindent 12 }}
{{- end }}
{{- end }}
