// Package volumes discovers the instance's block devices and lays out its
// data volumes without ever formatting a disk that holds data.
//
// The pipeline is discover (sysfs, /dev links, mountinfo, NVMe identify; a
// pure-Go signature probe plus blkid -p and wipefs -n) -> DecideLaunch (pure:
// which disks are Joiner's) -> PlanVolumes (pure: inventory + config +
// journal + launch record -> actions) -> Executor (mdadm, mkfs, .mount
// units, mounts). Setup runs all three; Recheck is the agent-start variant
// that never formats unless config.Volumes.FormatOnAgentStart.
//
// Identity: only disks Joiner attached at launch are ever formatted. The
// first bootstrap of an instance writes StateDir/launch.json (atomically,
// before any mkfs): the data volumes present at that boot, each by its EBS
// volume ID (the NVMe serial vol0123... is vol-0123...), EBS volumes kept
// only when the launch block-device mapping (IMDS, when reachable) lists
// their mapping name. Bootstrap runs before the kubelet, so no CSI volume
// can be attached then. Once a setup succeeds the record is marked
// setupComplete and nothing but instance-store disks is formatted again; on
// later boots data volumes are the record's, in its order, found by volume
// ID, and mounted only when they hold the filesystem the journal says joiner
// made (by UUID). Any other EBS volume (a CSI volume attached across a
// reboot) gets no mount point and is never touched. A record made for
// another instance ID (an AMI made from a node) is ignored; no record on a
// machine that was set up before (journal) or whose kubelet joined a cluster
// is adopted as complete. The agent never makes or changes the record. The
// executor reads the disk's serial again right before mkfs.
//
// Safety rules, in the order the planner applies them:
//   - the root disk, and any disk that is partitioned, held (md/dm), swap,
//     read-only or mounted elsewhere, is never touched;
//   - a disk with any signature (filesystem, RAID, LVM, LUKS, swap, partition
//     table incl. a backup GPT header alone) seen by the probe or by
//     blkid/wipefs is left alone, unless it is a filesystem whose UUID the
//     journal says joiner created on that disk;
//   - a disk with no signature but non-zero bytes in its first or last MiB is
//     left alone unless AllowNonZero;
//   - a blank disk is formatted only if it is an instance-store disk or the
//     launch record lists it and the first setup has not completed;
//   - the executor probes again right before mdadm/mkfs and refuses if
//     anything appeared; mkfs never gets -f.
//
// Crash safety: the planner picks the new filesystem's UUID and the journal
// (StateDir/volumes.json, written atomically) records it in phase
// "formatting" before mkfs runs and "formatted" after. A re-run that finds
// that UUID on the disk mounts it (after xfs_repair -n / e2fsck -fn when the
// journal still says "formatting") and never formats again. Unit files are
// written atomically and only when their content changes, so re-running is a
// no-op. With config Persist "fstab", UUID= lines go into a block of the
// fstab that joiner owns instead of unit files; other lines are never changed.
package volumes
