package volumes

import (
	"bytes"
	"encoding/binary"
	"encoding/hex"
	"fmt"
	"io"
)

// Signature is one on-disk signature the probe found: a filesystem, a RAID or
// LVM member, a LUKS header, swap, or a partition table.
type Signature struct {
	Type   string // libblkid-style TYPE or PTTYPE: xfs, ext4, gpt, dos, LVM2_member, ...
	Usage  string // filesystem, raid, crypto, partition-table, other
	Offset int64  // byte offset of the magic
	UUID   string // filesystem UUID when the probe can read it (xfs, ext*)
}

// ProbeResult is what the pure-Go probe saw on a device.
type ProbeResult struct {
	Signatures []Signature
	// NonZero reports non-zero bytes in the first or last ProbeZeroWindow bytes
	// of the device. A fresh EBS volume or a trimmed instance-store disk reads
	// as zeros there; anything else is data of unknown kind.
	NonZero bool
}

// Blank reports whether the probe saw no signature at all. Callers decide
// separately whether NonZero data also rules a format out (it does by default).
func (r ProbeResult) Blank() bool { return len(r.Signatures) == 0 }

// Filesystem returns the first filesystem signature, if any.
func (r ProbeResult) Filesystem() (Signature, bool) {
	for _, s := range r.Signatures {
		if s.Usage == UsageFilesystem {
			return s, true
		}
	}
	return Signature{}, false
}

// Signature usages.
const (
	UsageFilesystem     = "filesystem"
	UsageRAID           = "raid"
	UsageCrypto         = "crypto"
	UsagePartitionTable = "partition-table"
	UsageOther          = "other"
)

// ProbeZeroWindow is how much of the head and the tail of a device must read
// as zeros for it to count as never written.
const ProbeZeroWindow = 1 << 20

// magicDef is one known signature: a magic at one or more offsets, each
// relative to the start of the device or (fromEnd) computed from its size.
type magicDef struct {
	typ, usage string
	magic      []byte
	offsets    func(size int64) []int64
}

func at(offs ...int64) func(int64) []int64 { return func(int64) []int64 { return offs } }

func le32(v uint32) []byte { b := make([]byte, 4); binary.LittleEndian.PutUint32(b, v); return b }
func be32(v uint32) []byte { b := make([]byte, 4); binary.BigEndian.PutUint32(b, v); return b }
func le64(v uint64) []byte { b := make([]byte, 8); binary.LittleEndian.PutUint64(b, v); return b }
func be64(v uint64) []byte { b := make([]byte, 8); binary.BigEndian.PutUint64(b, v); return b }

const mdMagic = 0xa92b4efc

// zfsUberblocks lists the uberblock slots of the four ZFS vdev labels (two at
// the head, two at the tail; the uberblock ring starts 128 KiB into a label).
func zfsUberblocks(size int64) []int64 {
	labels := []int64{0, 256 << 10}
	if size >= 1<<20 {
		end := size &^ (256<<10 - 1)
		labels = append(labels, end-512<<10, end-256<<10)
	}
	var offs []int64
	for _, l := range labels {
		for k := int64(0); k < 128; k++ {
			offs = append(offs, l+128<<10+k*1024)
		}
	}
	return offs
}

// mdOffsets: v1.1 at 0, v1.2 at 4 KiB, v1.0 near the end (8 KiB from the end,
// 4 KiB aligned); 0.90 is handled by md090Offset.
func md1Offsets(size int64) []int64 {
	offs := []int64{0, 4096}
	if size >= 12<<10 {
		offs = append(offs, ((size>>9)-16)&^7<<9)
	}
	return offs
}

// md090Offset: the 0.90 superblock sits in the last 64 KiB-aligned 64 KiB block.
func md090Offset(size int64) []int64 {
	if size < 128<<10 {
		return nil
	}
	return []int64{(size &^ (64<<10 - 1)) - 64<<10}
}

// tailOffsets returns offsets measured back from the end of the device.
func tailOffsets(back ...int64) func(int64) []int64 {
	return func(size int64) []int64 {
		var offs []int64
		for _, b := range back {
			if size >= b {
				offs = append(offs, size-b)
			}
		}
		return offs
	}
}

var swapMagics = [][]byte{[]byte("SWAPSPACE2"), []byte("SWAP-SPACE"), []byte("S1SUSPEND"), []byte("S2SUSPEND"), []byte("ULSUSPEND"), []byte("LINHIB0001")}

// magicDefs is the table of signatures the probe knows: every TYPE/PTTYPE a
// data disk could plausibly carry. It errs towards "something is there": a
// magic alone is enough, with no checksum validation (libblkid validates more
// and so reports less).
var magicDefs = func() []magicDef {
	d := []magicDef{
		{"xfs", UsageFilesystem, []byte("XFSB"), at(0)},
		{"ext4", UsageFilesystem, []byte{0x53, 0xEF}, at(1024 + 0x38)},
		{"btrfs", UsageFilesystem, []byte("_BHRfS_M"), at(64<<10+0x40, 64<<20+0x40)},
		{"f2fs", UsageFilesystem, le32(0xF2F52010), at(1024)},
		{"erofs", UsageFilesystem, le32(0xE0F5E1E2), at(1024)},
		{"squashfs", UsageFilesystem, []byte("hsqs"), at(0)},
		{"jfs", UsageFilesystem, []byte("JFS1"), at(32768)},
		{"reiserfs", UsageFilesystem, []byte("ReIsEr"), at(64<<10+52, 8<<10+52)},
		{"nilfs2", UsageFilesystem, []byte{0x34, 0x34}, at(1024 + 6)},
		{"gfs2", UsageFilesystem, be32(0x01161970), at(64 << 10)},
		{"hfsplus", UsageFilesystem, []byte("H+"), at(1024)},
		{"hfsplus", UsageFilesystem, []byte("HX"), at(1024)},
		{"ntfs", UsageFilesystem, []byte("NTFS    "), at(3)},
		{"exfat", UsageFilesystem, []byte("EXFAT   "), at(3)},
		{"vfat", UsageFilesystem, []byte("FAT1"), at(54)},
		{"vfat", UsageFilesystem, []byte("FAT32   "), at(82)},
		{"iso9660", UsageFilesystem, []byte("CD001"), at(32769)},
		{"udf", UsageFilesystem, []byte("BEA01"), at(32769)},
		{"ocfs2", UsageFilesystem, []byte("OCFSV2"), at(1<<10, 2<<10, 4<<10, 8<<10, 16<<10, 32<<10)},
		{"ceph_bluestore", UsageOther, []byte("bluestore block device"), at(0)},
		{"vdo", UsageOther, []byte("dmvdo001"), at(0)},
		{"DM_integrity", UsageOther, []byte("integrt"), at(0)},
		{"DM_verity_hash", UsageOther, []byte("verity\x00\x00"), at(0)},
		{"bcache", UsageOther, []byte{0xc6, 0x85, 0x73, 0xf6, 0x4e, 0x1a, 0x45, 0xca, 0x82, 0x65, 0xf5, 0x7f, 0x48, 0xba, 0x6d, 0x81}, at(4096 + 24)},
		{"BitLocker", UsageCrypto, []byte("-FVE-FS-"), at(3)},
		{"crypto_LUKS", UsageCrypto, []byte("LUKS\xba\xbe"), at(0)},
		{"crypto_LUKS", UsageCrypto, []byte("SKUL\xba\xbe"), at(16<<10, 32<<10, 64<<10, 128<<10, 256<<10, 512<<10, 1<<20, 2<<20, 4<<20)},
		{"LVM2_member", UsageRAID, []byte("LABELONE"), at(0, 512, 1024, 1536)},
		{"linux_raid_member", UsageRAID, le32(mdMagic), md1Offsets},
		{"linux_raid_member", UsageRAID, le32(mdMagic), md090Offset},
		{"linux_raid_member", UsageRAID, be32(mdMagic), md090Offset},
		{"ddf_raid_member", UsageRAID, be32(0xDE11DE11), tailOffsets(512)},
		{"isw_raid_member", UsageRAID, []byte("Intel Raid ISM Cfg Sig. "), tailOffsets(1024)},
		{"zfs_member", UsageFilesystem, le64(0x00bab10c), zfsUberblocks},
		{"zfs_member", UsageFilesystem, be64(0x00bab10c), zfsUberblocks},
		{"gpt", UsagePartitionTable, []byte("EFI PART"), at(512, 4096)},
		{"gpt", UsagePartitionTable, []byte("EFI PART"), tailOffsets(512, 4096)}, // backup header
		{"dos", UsagePartitionTable, []byte{0x55, 0xAA}, at(510)},                // MBR or any boot sector
	}
	// Swap and the software-suspend images keep their magic at pagesize-10.
	for _, m := range swapMagics {
		for _, page := range []int64{4096, 8192, 16384, 65536} {
			d = append(d, magicDef{"swap", UsageOther, m, at(page - 10)})
		}
	}
	return d
}()

// Probe looks for every known signature on r (a device of size bytes) and
// checks whether its head and tail read as zeros. Read errors are returned:
// a device the probe cannot read is never blank.
func Probe(r io.ReaderAt, size int64) (ProbeResult, error) {
	var res ProbeResult
	buf := make([]byte, 64)
	for _, d := range magicDefs {
		for _, off := range d.offsets(size) {
			n := int64(len(d.magic))
			if off < 0 || off+n > size {
				continue
			}
			if _, err := r.ReadAt(buf[:n], off); err != nil {
				return res, fmt.Errorf("reading %d bytes at offset %d: %w", n, off, err)
			}
			if !bytes.Equal(buf[:n], d.magic) {
				continue
			}
			sig := Signature{Type: d.typ, Usage: d.usage, Offset: off}
			if err := refine(r, size, &sig); err != nil {
				return res, err
			}
			res.Signatures = append(res.Signatures, sig)
		}
	}
	nz, err := nonZero(r, size)
	if err != nil {
		return res, err
	}
	res.NonZero = nz
	return res, nil
}

// refine reads the UUID and the exact ext flavour where the probe can.
func refine(r io.ReaderAt, size int64, s *Signature) error {
	read := func(off int64, n int) ([]byte, error) {
		if off+int64(n) > size {
			return nil, nil
		}
		b := make([]byte, n)
		if _, err := r.ReadAt(b, off); err != nil {
			return nil, fmt.Errorf("reading superblock at %d: %w", off, err)
		}
		return b, nil
	}
	switch s.Type {
	case "xfs":
		b, err := read(32, 16)
		if err != nil || b == nil {
			return err
		}
		s.UUID = formatUUID(b)
	case "ext4":
		b, err := read(1024, 0x78)
		if err != nil || b == nil {
			return err
		}
		compat := binary.LittleEndian.Uint32(b[0x5C:])
		incompat := binary.LittleEndian.Uint32(b[0x60:])
		switch {
		case incompat&(0x40|0x80|0x200) != 0: // extents, 64bit, flex_bg
			s.Type = "ext4"
		case compat&0x4 != 0: // has_journal
			s.Type = "ext3"
		default:
			s.Type = "ext2"
		}
		s.UUID = formatUUID(b[0x68:0x78])
	}
	return nil
}

func formatUUID(b []byte) string {
	h := hex.EncodeToString(b)
	return h[0:8] + "-" + h[8:12] + "-" + h[12:16] + "-" + h[16:20] + "-" + h[20:32]
}

func nonZero(r io.ReaderAt, size int64) (bool, error) {
	win := int64(ProbeZeroWindow)
	if win > size {
		win = size
	}
	buf := make([]byte, 64<<10)
	check := func(start, end int64) (bool, error) {
		for off := start; off < end; off += int64(len(buf)) {
			n := min(int64(len(buf)), end-off)
			if _, err := r.ReadAt(buf[:n], off); err != nil {
				return false, fmt.Errorf("reading %d bytes at offset %d: %w", n, off, err)
			}
			for _, c := range buf[:n] {
				if c != 0 {
					return true, nil
				}
			}
		}
		return false, nil
	}
	if nz, err := check(0, win); nz || err != nil {
		return nz, err
	}
	return check(size-win, size)
}
