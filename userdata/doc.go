// Package userdata renders the EC2 user data of a Joiner node, one renderer
// per AMI family, following Karpenter v1's observable behaviour.
//
// The package is pure: Render takes an Input (built from an EC2NodeClass and a
// NodePool or NodeClaim by FromNodePool / FromNodeClaim) and returns the raw
// user data bytes; the launcher base64-encodes them for the launch template.
// No I/O, no clock, and the output is deterministic: every map (labels,
// reserved resources, eviction signals, TOML tables, YAML keys) is written in
// sorted key order.
//
// # Families
//
//   - AL2 and Ubuntu: a MIME multipart archive (boundary "//"). The user's
//     parts come first (a MIME archive is split into its parts with all their
//     headers, a quoted-printable body decoded as Go's multipart reader
//     decodes it; anything else becomes one text/x-shellscript part), then
//     the Joiner hook part (below), then a shell part calling
//     /etc/eks/bootstrap.sh with --apiserver-endpoint, --b64-cluster-ca,
//     --ip-family ipv6 (IPv6 cluster DNS only), --dns-cluster-ip,
//     --use-max-pods false, --kubelet-extra-args and --local-disks raid0.
//   - AL2023: a MIME multipart archive for nodeadm. User parts first (MIME
//     parts keep only their Content-Type, quoted-printable bodies decoded;
//     a plain YAML/JSON map becomes an
//     application/node.eks.aws part; anything else a shell part), then the
//     Joiner hook, then Joiner's NodeConfig last, so nodeadm's merge gives it
//     precedence. Rendering fails with ErrServiceCIDRUnknown when the cluster
//     service CIDR is not known.
//   - Bottlerocket: TOML. The user's TOML is merged: Joiner owns
//     settings.kubernetes cluster-name, api-server, cluster-certificate,
//     max-pods, cluster-dns-ip and every kubelet field the EC2NodeClass sets;
//     node-labels are merged (Joiner wins), node-taints are replaced, unknown
//     settings.kubernetes keys (those Karpenter's typed settings lack) and
//     top-level tables other than settings are dropped, other settings.*
//     tables survive. With instanceStorePolicy RAID0 a bootstrap command
//     mounts the instance store: "apiclient ephemeral-storage bind" for a
//     release that binds the default directories itself (alias @latest or
//     v1.46.0 and later, see BottlerocketVersion), else with --dirs. Invalid
//     TOML is an error naming the line.
//   - Windows2019/2022/2025: a <powershell> script, the user's commands first,
//     then Start-EKSBootstrap.ps1.
//   - Custom: the user's userData byte for byte; nothing is added.
//
// # The Joiner hook
//
// When the EC2NodeClass does not opt out with the annotation
// joiner.io/agent: "false" (the default is on), the node runs
// "joiner bootstrap" on first boot, before the kubelet starts, to prepare data
// volumes and start the Joiner agent:
//
//   - AL2, AL2023, Ubuntu: an extra text/x-shellscript MIME part, placed after
//     the user's parts and before Joiner's bootstrap part (AL2/Ubuntu run parts
//     in order, so it runs before bootstrap.sh starts the kubelet; on AL2023
//     cloud-init runs shell parts before nodeadm's run phase starts the
//     kubelet). It logs to /var/log/joiner-bootstrap.log and the console.
//   - Bottlerocket: a bootstrap container,
//     settings.bootstrap-containers.joiner-bootstrap with source = the Joiner
//     image (Input.BootstrapImage, default DefaultBootstrapImage),
//     mode = "always", essential = true. Bootstrap containers run before the
//     kubelet on every boot; the key is Joiner-owned and overrides the user's.
//   - Windows and Custom: no hook (the agent is not shipped for Windows; a
//     Custom AMI bootstraps itself).
//
// # Reading user data back
//
// Parse(family, data) recovers the node labels, taints and max pods a
// rendered user data registers the kubelet with; the simulator uses it to
// "boot" instances.
package userdata
