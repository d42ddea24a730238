{{/* Names */}}
{{- define "joiner.name" -}}
{{- default .Chart.Name .Values.nameOverride | trunc 63 | trimSuffix "-" -}}
{{- end -}}

{{- define "joiner.fullname" -}}
{{- if .Values.fullnameOverride -}}
{{- .Values.fullnameOverride | trunc 63 | trimSuffix "-" -}}
{{- else if contains (include "joiner.name" .) .Release.Name -}}
{{- .Release.Name | trunc 63 | trimSuffix "-" -}}
{{- else -}}
{{- printf "%s-%s" .Release.Name (include "joiner.name" .) | trunc 63 | trimSuffix "-" -}}
{{- end -}}
{{- end -}}

{{/*
Object names. Every name is at most 63 characters (DNS labels: Services,
pod hostnames). The StatefulSet's name is at most 52: its pods carry the
label controller-revision-hash=<name>-<hash of up to 10 characters>, and
its pods are <name>-<ordinal>. Hence the coordinators' names start with the
fullname's first 39 characters (39 + "-coordinator" = 51; + "-status",
the longest suffix, = 58), the agents' with its first 48 (48 + "-agent" +
"-own-node" = 63). The status ServiceAccount is <coordinator>-status (at
most 58); its reader Role, whose suffix is longer, takes the fullname's
first 37 (37 + "-coordinator-status-reader" = 63); the aggregated admin
ClusterRole its first 57 (57 + "-admin" = 63).
*/}}
{{- define "joiner.base" -}}{{ include "joiner.fullname" . | trunc 39 | trimSuffix "-" }}{{- end -}}
{{- define "joiner.coordinator" -}}{{ include "joiner.base" . }}-coordinator{{- end -}}
{{- define "joiner.coordinatorHeadless" -}}{{ include "joiner.coordinator" . }}-peers{{- end -}}
{{- define "joiner.statusServiceAccount" -}}{{ include "joiner.coordinator" . }}-status{{- end -}}
{{- define "joiner.metricsReader" -}}{{ include "joiner.fullname" . | trunc 48 | trimSuffix "-" }}-metrics-reader{{- end -}}
{{- define "joiner.statusReader" -}}{{ include "joiner.fullname" . | trunc 37 | trimSuffix "-" }}-coordinator-status-reader{{- end -}}
{{- define "joiner.adminRole" -}}{{ include "joiner.fullname" . | trunc 57 | trimSuffix "-" }}-admin{{- end -}}
{{- define "joiner.agent" -}}{{ include "joiner.fullname" . | trunc 48 | trimSuffix "-" }}-agent{{- end -}}

{{/* The coordinators' ServiceAccount (Karpenter's serviceAccount.create/name). */}}
{{- define "joiner.serviceAccountName" -}}
{{- if .Values.serviceAccount.create -}}
{{- default (include "joiner.coordinator" .) .Values.serviceAccount.name -}}
{{- else -}}
{{- required "serviceAccount.name: with serviceAccount.create=false name the ServiceAccount the coordinators run as (the namespace's default account would get the coordinator's ClusterRole)" .Values.serviceAccount.name -}}
{{- end -}}
{{- end -}}

{{- define "joiner.chart" -}}
{{- printf "%s-%s" .Chart.Name .Chart.Version | replace "+" "_" | trunc 63 | trimSuffix "-" -}}
{{- end -}}

{{- define "joiner.labels" -}}
helm.sh/chart: {{ include "joiner.chart" . }}
app.kubernetes.io/name: {{ include "joiner.name" . }}
app.kubernetes.io/instance: {{ .Release.Name }}
app.kubernetes.io/version: {{ .Chart.AppVersion | quote }}
app.kubernetes.io/managed-by: {{ .Release.Service }}
{{- with .Values.additionalLabels }}
{{ toYaml . }}
{{- end }}
{{- end -}}

{{/*
metadata.annotations of an object (at indentation 2, with its leading line
break): additionalAnnotations and the object's own (dict "ctx" $ "extra"
map); nothing when both are empty.
*/}}
{{- define "joiner.annotations" -}}
{{- $all := merge (deepCopy (.extra | default dict)) (deepCopy (.ctx.Values.additionalAnnotations | default dict)) -}}
{{- with $all }}
  annotations:
    {{- toYaml . | nindent 4 }}
{{- end }}
{{- end -}}

{{- define "joiner.coordinatorSelector" -}}
app.kubernetes.io/name: {{ include "joiner.name" . }}
app.kubernetes.io/instance: {{ .Release.Name }}
app.kubernetes.io/component: coordinator
{{- end -}}

{{- define "joiner.agentSelector" -}}
app.kubernetes.io/name: {{ include "joiner.name" . }}
app.kubernetes.io/instance: {{ .Release.Name }}
app.kubernetes.io/component: agent
{{- end -}}

{{/*
The coordinators' affinity (values affinity): a pod (anti-)affinity term
without a labelSelector gets the coordinators' selector labels, as
Karpenter's chart does for its controller.
*/}}
{{- define "joiner.coordinatorAffinity" -}}
{{- $sel := include "joiner.coordinatorSelector" . | fromYaml -}}
{{- $aff := deepCopy (.Values.affinity | default dict) -}}
{{- range $kind := list "podAffinity" "podAntiAffinity" -}}
{{- with (get $aff $kind) -}}
{{- range (.requiredDuringSchedulingIgnoredDuringExecution | default list) -}}
{{- if not .labelSelector }}{{ $_ := set . "labelSelector" (dict "matchLabels" $sel) }}{{ end -}}
{{- end -}}
{{- range (.preferredDuringSchedulingIgnoredDuringExecution | default list) -}}
{{- if and .podAffinityTerm (not .podAffinityTerm.labelSelector) }}{{ $_ := set .podAffinityTerm "labelSelector" (dict "matchLabels" $sel) }}{{ end -}}
{{- end -}}
{{- end -}}
{{- end -}}
{{- with $aff }}{{ toYaml . }}{{ end -}}
{{- end -}}

{{/* topologySpreadConstraints with the selector filled in where absent. */}}
{{- define "joiner.coordinatorSpread" -}}
{{- $sel := include "joiner.coordinatorSelector" . | fromYaml -}}
{{- $out := list -}}
{{- range (deepCopy (.Values.topologySpreadConstraints | default list)) -}}
{{- if not .labelSelector }}{{ $_ := set . "labelSelector" (dict "matchLabels" $sel) }}{{ end -}}
{{- $out = append $out . -}}
{{- end -}}
{{- with $out }}{{ toYaml . }}{{ end -}}
{{- end -}}

{{/*
The coordinator container's security context: the restricted profile, with
controller.securityContext's appArmorProfile, seLinuxOptions and
seccompProfile set on top where given.
*/}}
{{- define "joiner.coordinatorSecurityContext" -}}
{{- $sc := include "joiner.containerSecurityContext" . | fromYaml -}}
{{- range $k, $v := (.Values.controller.securityContext | default dict) -}}
{{- if $v }}{{ $_ := set $sc $k $v }}{{ end -}}
{{- end -}}
{{- toYaml $sc -}}
{{- end -}}

{{- define "joiner.image" -}}
{{- if .Values.image.digest -}}
{{ .Values.image.repository }}@{{ .Values.image.digest }}
{{- else -}}
{{ .Values.image.repository }}:{{ default .Chart.AppVersion .Values.image.tag }}
{{- end -}}
{{- end -}}

{{/*
The Bottlerocket bootstrap container's image (user data of Bottlerocket
nodes; it runs `joiner bootstrap` as root before kubelet): settings.bootstrapImage,
else the chart's own image. Pinned: a fixed tag or a digest, never :latest.
*/}}
{{- define "joiner.bootstrapImage" -}}
{{- $img := .Values.settings.bootstrapImage | default (include "joiner.image" .) -}}
{{- if or (hasSuffix ":latest" $img) (not (regexMatch "(:[^:/@]+|@sha256:[0-9a-f]{64})$" $img)) -}}
{{- fail (printf "the bootstrap image %q is not pinned: set settings.bootstrapImage (or image.tag / image.digest) to a fixed tag or an @sha256 digest" $img) -}}
{{- end -}}
{{- $img -}}
{{- end -}}

{{/* The coordinators' stable DNS domain: <pod>.<headless>.<ns>.svc.<domain> */}}
{{- define "joiner.peerDomain" -}}
{{ include "joiner.coordinatorHeadless" . }}.{{ .Release.Namespace }}.svc.{{ .Values.settings.clusterDomain }}
{{- end -}}

{{/* The coordinators' CA: Secret (key and certificate) and ConfigMap
(certificate only, for agents) of the same name. */}}
{{- define "joiner.coordinatorCA" -}}{{ include "joiner.coordinator" . }}-ca{{- end -}}

{{- define "joiner.coordinatorURL" -}}
https://{{ include "joiner.coordinator" . }}.{{ .Release.Namespace }}.svc.{{ .Values.settings.clusterDomain }}:{{ .Values.controller.metrics.port }}
{{- end -}}

{{/* A settings string, which may hold a template (as in Karpenter's chart). */}}
{{- define "joiner.setting" -}}
{{- tpl (toString (index .ctx.Values.settings .key)) .ctx -}}
{{- end -}}

{{/* bootstrap_expect: coordinator.bootstrapExpect, else replicas. */}}
{{- define "joiner.bootstrapExpect" -}}
{{- if kindIs "invalid" .Values.coordinator.bootstrapExpect -}}
{{- .Values.replicas | int -}}
{{- else -}}
{{- .Values.coordinator.bootstrapExpect | int -}}
{{- end -}}
{{- end -}}

{{/*
Karpenter's chart values that Joiner does not implement: the chart refuses
to render when one is set to anything but its default (or to a value Joiner
behaves as), naming the value. Included once, by the StatefulSet.
*/}}
{{- define "joiner.validate" -}}
{{- $v := .Values -}}
{{- $s := .Values.settings -}}
{{- if lt (int $v.replicas) 1 -}}
{{- fail (printf "replicas=%v: at least one coordinator is needed" $v.replicas) -}}
{{- end -}}
{{- range $k := list "amiRefreshInterval" "subnetRefreshInterval" -}}
{{- $d := toString (index $s $k) -}}
{{- if not (regexMatch "^([0-9]+h)?([0-9]+m)?([0-9]+s)?$" $d) -}}
{{- fail (printf "settings.%s=%s: want a duration of whole hours, minutes and seconds, at least 1m" $k $d) -}}
{{- end -}}
{{- if not (regexMatch "[hm]" $d) -}}
{{- fail (printf "settings.%s=%s: at least 1m (the coordinator refuses shorter refreshes)" $k $d) -}}
{{- end -}}
{{- end -}}
{{- $pdb := toString $v.podDisruptionBudget.maxUnavailable -}}
{{- $tolerated := max 1 (div (sub (int $v.replicas) 1) 2) -}}
{{- if or (not (regexMatch "^[0-9]+$" $pdb)) (lt (int $pdb) 1) (gt (int $pdb) (int $tolerated)) -}}
{{- fail (printf "podDisruptionBudget.maxUnavailable=%s: must be a whole number from 1 to %d with replicas=%v, so evictions never take a raft majority (percentages are refused)" $pdb (int $tolerated) $v.replicas) -}}
{{- end -}}
{{- if ne (include "joiner.bootstrapExpect" .) (toString (int $v.replicas)) -}}
{{- fail (printf "coordinator.bootstrapExpect (%v) must equal replicas (%v): leave it empty" $v.coordinator.bootstrapExpect $v.replicas) -}}
{{- end -}}
{{- with $v.strategy -}}
{{- $ru := .rollingUpdate | default dict -}}
{{- if or (and .type (ne .type "RollingUpdate")) (and (hasKey $ru "maxUnavailable") (ne (toString $ru.maxUnavailable) "1")) (gt (len (omit $ru "maxUnavailable")) 0) (gt (len (omit . "type" "rollingUpdate")) 0) -}}
{{- fail (printf "strategy=%s is not supported: the coordinators are a StatefulSet updated one pod at a time so a raft majority stays up (only strategy.rollingUpdate.maxUnavailable=1)" (toJson .)) -}}
{{- end -}}
{{- end -}}
{{- with $v.controller.image -}}
{{- if and (or .repository .tag .digest) (not (hasPrefix "public.ecr.aws/karpenter/" (.repository | default ""))) -}}
{{- fail (printf "controller.image=%s is not supported: it is Karpenter's controller image; set Joiner's image with image.repository, image.tag or image.digest" (toJson .)) -}}
{{- end -}}
{{- end -}}
{{- $hp := toString $v.controller.healthProbe.port -}}
{{- if and (ne $hp "8081") (ne $hp (toString $v.controller.metrics.port)) -}}
{{- fail (printf "controller.healthProbe.port=%s is not supported: the coordinators answer /healthz and /readyz on controller.metrics.port (%v)" $hp $v.controller.metrics.port) -}}
{{- end -}}
{{- range $key := list "logOutputPaths" "logErrorOutputPaths" -}}
{{- $paths := index $v $key | default list -}}
{{- if or (gt (len $paths) 1) (and (eq (len $paths) 1) (not (has (first $paths) (list "stdout" "stderr")))) -}}
{{- fail (printf "%s=%s is not supported: Joiner logs to the container's standard streams (stdout or stderr)" $key (toJson $paths)) -}}
{{- end -}}
{{- end -}}
{{- if ne $s.preferencePolicy "Respect" -}}
{{- fail (printf "settings.preferencePolicy=%s is not supported: Joiner always respects preferences (Respect)" $s.preferencePolicy) -}}
{{- end -}}
{{- if ne (float64 $s.vmMemoryOverheadPercent) 0.075 -}}
{{- fail (printf "settings.vmMemoryOverheadPercent=%v is not supported: Joiner models Karpenter's default 0.075" $s.vmMemoryOverheadPercent) -}}
{{- end -}}
{{- if ne (toString $s.reservedENIs) "0" -}}
{{- fail (printf "settings.reservedENIs=%v is not supported: Joiner counts every ENI in max-pods (only \"0\")" $s.reservedENIs) -}}
{{- end -}}
{{- if $s.enableZonalShift -}}
{{- fail "settings.enableZonalShift=true is not supported: Joiner does not follow EKS zonal shifts" -}}
{{- end -}}
{{- if not $s.ignoreDRARequests -}}
{{- fail "settings.ignoreDRARequests=false is not supported: Joiner always ignores pods' DRA requests while planning" -}}
{{- end -}}
{{- if $s.disableClusterStateObservability -}}
{{- fail "settings.disableClusterStateObservability=true is not supported: Joiner always serves its cluster state metrics and events" -}}
{{- end -}}
{{- range $gate, $on := $s.featureGates -}}
{{- if and $on (has $gate (list "nodeRepair" "nodeOverlay" "capacityBuffer")) -}}
{{- fail (printf "settings.featureGates.%s=true is not supported: Joiner does not implement %s" $gate $gate) -}}
{{- end -}}
{{- end -}}
{{- if eq (toString $v.dnsPolicy) "Default" -}}
{{- fail "dnsPolicy=Default is not supported: the coordinators find their raft peers by cluster DNS names (<pod>.<headless Service>), which the node's resolver cannot answer, so raft would never form. Keep ClusterFirst and, rather than Default (which Karpenter's docs suggest when CoreDNS runs on Karpenter's nodes), run CoreDNS on capacity Joiner does not manage alone, e.g. the coordinators' node group" -}}
{{- end -}}
{{- if and (eq (toString $v.dnsPolicy) "None") (not (($v.dnsConfig | default dict).nameservers)) -}}
{{- fail "dnsPolicy=None needs dnsConfig.nameservers (the cluster DNS Service's address): the coordinators find their raft peers by cluster DNS names (<pod>.<headless Service>), so without it raft would never form" -}}
{{- end -}}
{{- range $name, $res := dict "controller.resources" $v.controller.resources "agent.resources" $v.agent.resources -}}
{{- $lim := ($res | default dict).limits | default dict -}}
{{- range $k, $q := (($res | default dict).requests | default dict) -}}
{{- $l := index $lim $k -}}
{{- if and (hasKey $lim $k) (not (kindIs "invalid" $l)) (not (kindIs "invalid" $q)) -}}
{{- $rq := include "joiner.quantity" (dict "q" $q "name" (printf "%s.requests.%s" $name $k)) | float64 -}}
{{- $lq := include "joiner.quantity" (dict "q" $l "name" (printf "%s.limits.%s" $name $k)) | float64 -}}
{{- if gt $rq $lq -}}
{{- fail (printf "%s.requests.%s=%v exceeds %s.limits.%s=%v: the API server refuses a request above its limit: raise or remove the limit" $name $k $q $name $k $l) -}}
{{- end -}}
{{- end -}}
{{- end -}}
{{- end -}}
{{- /* Karpenter's operator options (core and AWS provider) read from the
environment: `joiner coordinator` reads none of them. */ -}}
{{- $karpenterEnv := dict
  "CLUSTER_NAME" "settings.clusterName" "CLUSTER_ENDPOINT" "settings.clusterEndpoint"
  "CLUSTER_CA_BUNDLE" "settings.clusterCABundle" "INTERRUPTION_QUEUE" "settings.interruptionQueue"
  "ISOLATED_VPC" "settings.isolatedVPC" "EKS_CONTROL_PLANE" "settings.eksControlPlane"
  "VM_MEMORY_OVERHEAD_PERCENT" "settings.vmMemoryOverheadPercent" "RESERVED_ENIS" "settings.reservedENIs"
  "DISABLE_DRY_RUN" "settings.disableDryRun" "ENABLE_ZONAL_SHIFT" "settings.enableZonalShift"
  "AMI_REFRESH_INTERVAL" "settings.amiRefreshInterval" "SUBNET_REFRESH_INTERVAL" "settings.subnetRefreshInterval"
  "BATCH_MAX_DURATION" "settings.batchMaxDuration" "BATCH_IDLE_DURATION" "settings.batchIdleDuration"
  "PREFERENCE_POLICY" "settings.preferencePolicy" "MIN_VALUES_POLICY" "settings.minValuesPolicy"
  "IGNORE_DRA_REQUESTS" "settings.ignoreDRARequests" "FEATURE_GATES" "settings.featureGates.*"
  "DISABLE_CLUSTER_STATE_OBSERVABILITY" "settings.disableClusterStateObservability"
  "KUBE_CLIENT_QPS" "settings.kubeClientQPS" "KUBE_CLIENT_BURST" "settings.kubeClientBurst"
  "LOG_LEVEL" "logLevel" "LOG_OUTPUT_PATHS" "logOutputPaths" "LOG_ERROR_OUTPUT_PATHS" "logErrorOutputPaths"
  "METRICS_PORT" "controller.metrics.port" "HEALTH_PROBE_PORT" "controller.metrics.port (one port serves /metrics and the probes)"
  "MEMORY_LIMIT" "controller.resources.limits.memory (GOMEMLIMIT follows it)" "CPU_REQUESTS" "controller.resources.requests.cpu"
-}}
{{- $karpenterEnvUnsupported := dict
  "KARPENTER_SERVICE" "Joiner runs no webhook" "ENABLE_PROFILING" "the coordinators serve no profiling endpoint"
  "DISABLE_CONTROLLER_WARMUP" "the coordinators elect their leader with raft, not a Lease"
  "DISABLE_LEADER_ELECTION" "the coordinators elect their leader with raft, not a Lease"
  "LEADER_ELECTION_NAME" "the coordinators elect their leader with raft, not a Lease"
  "LEADER_ELECTION_NAMESPACE" "the coordinators elect their leader with raft, not a Lease"
-}}
{{- range $e := $v.controller.env -}}
{{- $n := toString (($e | default dict).name) -}}
{{- with get $karpenterEnv $n -}}
{{- fail (printf "controller.env %s is Karpenter's setting, which joiner coordinator does not read: set %s instead" $n .) -}}
{{- end -}}
{{- with get $karpenterEnvUnsupported $n -}}
{{- fail (printf "controller.env %s is Karpenter's setting and is not supported: %s" $n .) -}}
{{- end -}}
{{- end -}}
{{- if and (regexMatch "[1-9]" (toString $v.interruption.forceAfter)) (not $v.agent.localDrain) -}}
{{- fail (printf "interruption.forceAfter=%v needs agent.localDrain=true: only the agent's own drain deletes pods whose eviction is still blocked, and the agent drains only with agent.localDrain (otherwise the coordinator drains)" $v.interruption.forceAfter) -}}
{{- end -}}
{{- end -}}

{{/*
A Kubernetes quantity (dict "q" quantity "name" value's name) as a number
of base units (2Gi, 500m, 1.5, 1e3), to compare requests with limits;
fails naming the value when it is not a quantity.
*/}}
{{- define "joiner.quantity" -}}
{{- $q := toString .q -}}
{{- if not (regexMatch "^([0-9]+(\\.[0-9]*)?|\\.[0-9]+)([eE][+-]?[0-9]+)?(Ki|Mi|Gi|Ti|Pi|Ei|n|u|m|k|M|G|T|P|E)?$" $q) -}}
{{- fail (printf "%s=%s is not a Kubernetes quantity (e.g. 500m, 2Gi)" .name $q) -}}
{{- end -}}
{{- $num := regexReplaceAll "^([0-9.]+([eE][+-]?[0-9]+)?)(.*)$" $q "${1}" -}}
{{- $unit := regexReplaceAll "^([0-9.]+([eE][+-]?[0-9]+)?)(.*)$" $q "${3}" -}}
{{- $factor := dict "" 1 "n" 1e-9 "u" 1e-6 "m" 1e-3 "k" 1e3 "M" 1e6 "G" 1e9 "T" 1e12 "P" 1e15 "E" 1e18
  "Ki" 1024 "Mi" 1048576 "Gi" 1073741824 "Ti" 1099511627776 "Pi" 1125899906842624 "Ei" 1152921504606846976 -}}
{{- mulf (float64 $num) (get $factor $unit) -}}
{{- end -}}

{{/*
Command-line flags of `joiner coordinator`. Every flag the chart passes is
here, in one place, so a renamed flag is a one-line change.
POD_NAME and POD_IP come from the downward API (see the StatefulSet).
*/}}
{{- define "joiner.coordinator.args" -}}
- coordinator
- --log-level={{ .Values.logLevel }}
- --log-format={{ .Values.logFormat }}
- --cluster-name={{ required "settings.clusterName is required" (include "joiner.setting" (dict "ctx" . "key" "clusterName")) }}
{{- with (include "joiner.setting" (dict "ctx" . "key" "clusterEndpoint")) }}
- --cluster-endpoint={{ . }}
{{- end }}
{{- with (include "joiner.setting" (dict "ctx" . "key" "clusterCABundle")) }}
- --cluster-ca-bundle={{ . }}
{{- end }}
- --kube-client-qps={{ .Values.settings.kubeClientQPS }}
- --kube-client-burst={{ .Values.settings.kubeClientBurst }}
- --min-values-policy={{ .Values.settings.minValuesPolicy }}
- --batch-idle-duration={{ .Values.settings.batchIdleDuration }}
- --batch-max-duration={{ .Values.settings.batchMaxDuration }}
- --ami-refresh-interval={{ .Values.settings.amiRefreshInterval }}
- --subnet-refresh-interval={{ .Values.settings.subnetRefreshInterval }}
{{- if .Values.settings.isolatedVPC }}
- --isolated-vpc
{{- end }}
{{- with .Values.settings.featureGates }}
- --feature-gates=ReservedCapacity={{ .reservedCapacity }},SpotToSpotConsolidation={{ .spotToSpotConsolidation }},NodeRepair={{ .nodeRepair }},NodeOverlay={{ .nodeOverlay }},StaticCapacity={{ .staticCapacity }},CapacityBuffer={{ .capacityBuffer }}
{{- end }}
- --bootstrap-image={{ include "joiner.bootstrapImage" . }}
- --data-dir=/var/lib/joiner
- --bind=$(POD_IP):{{ .Values.coordinator.ports.raft }}
- --advertise=$(POD_NAME).{{ include "joiner.peerDomain" . }}:{{ .Values.coordinator.ports.raft }}
- --gossip-bind=$(POD_IP):{{ .Values.coordinator.ports.gossip }}
- --join={{ include "joiner.peerDomain" . }}:{{ .Values.coordinator.ports.gossip }}
- --bootstrap-expect={{ include "joiner.bootstrapExpect" . }}
- --http-addr=$(POD_IP):{{ .Values.controller.metrics.port }}
{{- with (include "joiner.setting" (dict "ctx" . "key" "interruptionQueue")) }}
- --interruption-queue={{ . }}
{{- end }}
{{- if .Values.coordinator.tlsSecret }}
- --tls-cert-file=/etc/joiner/tls/tls.crt
- --tls-key-file=/etc/joiner/tls/tls.key
- --tls-ca-file=/etc/joiner/tls/ca.crt
{{- else }}
- --tls-ca-secret={{ include "joiner.coordinatorCA" . }}
- --tls-san={{ include "joiner.coordinator" . }}.{{ .Release.Namespace }}.svc,{{ include "joiner.coordinator" . }}.{{ .Release.Namespace }}.svc.{{ .Values.settings.clusterDomain }}
{{- end }}
- --tls-ca-configmap={{ include "joiner.coordinatorCA" . }}
- --namespace={{ .Release.Namespace }}
- --agent-service-account=system:serviceaccount:{{ .Release.Namespace }}:{{ include "joiner.agent" . }}
- --status-service-account=system:serviceaccount:{{ .Release.Namespace }}:{{ include "joiner.statusServiceAccount" . }}
{{- if .Values.coordinator.gossipKeyringSecret }}
- --gossip-keyring-file=/etc/joiner/keyring/keyring
{{- end }}
{{- range .Values.controller.extraArgs }}
- {{ . }}
{{- end }}
{{- end -}}

{{/*
Command-line flags of `joiner agent` (cmd/joiner/agent.go). HOST_IP comes
from the downward API; the pod uses the host network (IMDSv2 with hop limit
1).
*/}}
{{- define "joiner.agent.args" -}}
- agent
- --log-level={{ .Values.logLevel }}
- --log-format={{ .Values.logFormat }}
- --node-name=$(NODE_NAME)
- --poll-interval={{ .Values.agent.pollInterval }}
- --min-drain-window={{ .Values.agent.minDrainWindow }}
- --metrics-addr=$(HOST_IP):{{ .Values.agent.ports.metrics }}
{{- if .Values.interruption.enabled }}
{{- range $kind, $action := .Values.interruption.policy }}
- --policy={{ $kind }}={{ $action }}
{{- end }}
{{- else }}
{{- range $kind, $action := .Values.interruption.policy }}
- --policy={{ $kind }}=ignore
{{- end }}
{{- end }}
- --force-after={{ .Values.interruption.forceAfter }}
{{- if .Values.agent.dryRun }}
- --dry-run
{{- end }}
{{- if .Values.agent.coordinatorURLs }}
{{- range .Values.agent.coordinatorURLs }}
- --coordinator={{ . }}
{{- end }}
{{- else }}
- --coordinator={{ include "joiner.coordinatorURL" . }}
{{- end }}
{{- if not .Values.agent.localDrain }}
- --coordinator-drains
{{- end }}
- --coordinator-token-file=/var/run/secrets/joiner.io/token
- --coordinator-ca-file=/etc/joiner/coordinator-ca/ca.crt
{{- range .Values.agent.extraArgs }}
- {{ . }}
{{- end }}
{{- end -}}

{{/* Restricted-profile container security context. */}}
{{- define "joiner.containerSecurityContext" -}}
allowPrivilegeEscalation: false
readOnlyRootFilesystem: true
runAsNonRoot: true
runAsUser: 65532
runAsGroup: 65532
capabilities:
  drop: [ALL]
seccompProfile:
  type: RuntimeDefault
{{- end -}}

{{/* serviceMonitor's relabelings, metricRelabelings and endpointConfig, for each endpoint. */}}
{{- define "joiner.serviceMonitorEndpoint" -}}
{{- with .Values.serviceMonitor.bearerTokenFile }}
bearerTokenFile: {{ . }}
{{- end }}
{{- with .Values.serviceMonitor.relabelings }}
relabelings:
  {{- toYaml . | nindent 2 }}
{{- end }}
{{- with .Values.serviceMonitor.metricRelabelings }}
metricRelabelings:
  {{- toYaml . | nindent 2 }}
{{- end }}
{{- with .Values.serviceMonitor.endpointConfig }}
{{ toYaml . }}
{{- end }}
{{- end -}}
