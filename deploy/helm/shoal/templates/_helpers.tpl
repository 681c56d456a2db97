{{/* Shoal chart helpers. The generated templates (templates/generated,
templates/crds) come from deploy/ through hack/genchart. */}}

{{/* shoal.image: the image of a component, (list . "shoal-agent"):
images.coordinator or images.agent when set, else registry/name:tag. */}}
{{- define "shoal.image" -}}
{{- $root := index . 0 -}}
{{- $name := index . 1 -}}
{{- $whole := get $root.Values.images (trimPrefix "shoal-" $name) -}}
{{- if $whole -}}
{{- $whole -}}
{{- else -}}
{{- $img := $name -}}
{{- with $root.Values.images.registry -}}
{{- $img = printf "%s/%s" (trimSuffix "/" .) $name -}}
{{- end -}}
{{- $tag := $root.Values.images.tag -}}
{{- if and (not $tag) $root.Values.images.registry -}}
{{- $tag = $root.Chart.AppVersion -}}
{{- end -}}
{{- if $tag -}}
{{- $img = printf "%s:%s" $img $tag -}}
{{- end -}}
{{- $img -}}
{{- end -}}
{{- end -}}

{{/* shoal.args renders an args list from flags (a list of "--x=y"), or
nothing when there are none. */}}
{{- define "shoal.args" -}}
{{- if . -}}
args:
{{- range . }}
- {{ . | quote }}
{{- end }}
{{- end -}}
{{- end -}}

{{/* shoal.coordinator.args: the coordinator's flags set in values.yaml. */}}
{{- define "shoal.coordinator.args" -}}
{{- $c := .Values.coordinator -}}
{{- $flags := list -}}
{{- with $c.leaderElection.leaseDuration }}{{ $flags = append $flags (printf "--leader-lease-duration=%s" .) }}{{ end -}}
{{- with $c.leaderElection.renewDeadline }}{{ $flags = append $flags (printf "--leader-renew-deadline=%s" .) }}{{ end -}}
{{- with $c.leaderElection.retryPeriod }}{{ $flags = append $flags (printf "--leader-retry-period=%s" .) }}{{ end -}}
{{- with $c.featureGates }}{{ $flags = append $flags (printf "--feature-gates=%s" .) }}{{ end -}}
{{- with $c.kubeAPIQPS }}{{ $flags = append $flags (printf "--kube-api-qps=%v" .) }}{{ end -}}
{{- with $c.kubeAPIBurst }}{{ $flags = append $flags (printf "--kube-api-burst=%v" .) }}{{ end -}}
{{- range $c.extraArgs }}{{ $flags = append $flags . }}{{ end -}}
{{- include "shoal.args" $flags -}}
{{- end -}}

{{/* shoal.agent.args: the agent's flags set in values.yaml. */}}
{{- define "shoal.agent.args" -}}
{{- $a := .Values.agent -}}
{{- $flags := list -}}
{{- with $a.mirrorRegistries }}{{ $flags = append $flags (printf "--mirror-registries=%s" .) }}{{ end -}}
{{- with $a.ingressBytesPerSecond }}{{ $flags = append $flags (printf "--ingress-bytes-per-second=%v" (int64 .)) }}{{ end -}}
{{- with $a.egressBytesPerSecond }}{{ $flags = append $flags (printf "--egress-bytes-per-second=%v" (int64 .)) }}{{ end -}}
{{- with $a.imageStoreQuotaBytes }}{{ $flags = append $flags (printf "--image-store-quota=%v" (int64 .)) }}{{ end -}}
{{- with $a.maxPeerUploads }}{{ $flags = append $flags (printf "--max-peer-uploads=%v" (int64 .)) }}{{ end -}}
{{- with $a.maxConcurrentPulls }}{{ $flags = append $flags (printf "--max-concurrent-pulls=%v" (int64 .)) }}{{ end -}}
{{- range $a.extraArgs }}{{ $flags = append $flags . }}{{ end -}}
{{- include "shoal.args" $flags -}}
{{- end -}}
