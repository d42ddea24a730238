// Package packaging holds Joiner's deliverables other than the binary: the
// CRDs (crds/, generated), the Helm chart (helm/joiner), the systemd units
// (systemd/), the deb/rpm config (nfpm/) and the AMI template (packer/).
// Its tests lint and render the chart, verify the units, install the deb
// into a throwaway root and parse the Packer template.
package packaging
