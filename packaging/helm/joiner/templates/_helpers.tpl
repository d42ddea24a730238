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

{{- define "joiner.coordinator" -}}{{ include "joiner.fullname" . | trunc 51 }}-coordinator{{- end -}}
{{- define "joiner.coordinatorHeadless" -}}{{ include "joiner.coordinator" . }}-peers{{- end -}}
{{- define "joiner.agent" -}}{{ include "joiner.fullname" . | trunc 57 }}-agent{{- end -}}

{{- define "joiner.labels" -}}
helm.sh/chart: {{ printf "%s-%s" .Chart.Name .Chart.Version | replace "+" "_" }}
app.kubernetes.io/name: {{ include "joiner.name" . }}
app.kubernetes.io/instance: {{ .Release.Name }}
app.kubernetes.io/version: {{ .Chart.AppVersion | quote }}
app.kubernetes.io/managed-by: {{ .Release.Service }}
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
https://{{ include "joiner.coordinator" . }}.{{ .Release.Namespace }}.svc.{{ .Values.settings.clusterDomain }}:{{ .Values.coordinator.ports.http }}
{{- end -}}

{{/*
Command-line flags of `joiner coordinator`. Every flag the chart passes is
here, in one place, so a renamed flag is a one-line change.
POD_NAME and POD_IP come from the downward API (see the StatefulSet).
*/}}
{{- define "joiner.coordinator.args" -}}
- coordinator
- --log-level={{ .Values.settings.logLevel }}
- --log-format={{ .Values.settings.logFormat }}
- --cluster-name={{ required "settings.clusterName is required" .Values.settings.clusterName }}
{{- with .Values.settings.clusterEndpoint }}
- --cluster-endpoint={{ . }}
{{- end }}
{{- with .Values.settings.clusterCABundle }}
- --cluster-ca-bundle={{ . }}
{{- end }}
- --kube-client-qps={{ .Values.settings.kubeClientQPS }}
- --kube-client-burst={{ .Values.settings.kubeClientBurst }}
- --min-values-policy={{ .Values.settings.minValuesPolicy }}
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
- --bootstrap-expect={{ .Values.coordinator.bootstrapExpect }}
- --http-addr=$(POD_IP):{{ .Values.coordinator.ports.http }}
{{- if .Values.interruption.queueName }}
- --interruption-queue={{ .Values.interruption.queueName }}
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
{{- if .Values.coordinator.gossipKeyringSecret }}
- --gossip-keyring-file=/etc/joiner/keyring/keyring
{{- end }}
{{- range .Values.coordinator.extraArgs }}
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
- --log-level={{ .Values.settings.logLevel }}
- --log-format={{ .Values.settings.logFormat }}
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
