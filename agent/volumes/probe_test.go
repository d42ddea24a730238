package volumes

import (
	"bytes"
	"math/rand/v2"
	"testing"
)

// plant writes def's magic at its first offset that fits a device of size.
func plant(buf []byte, d magicDef) bool {
	for _, off := range d.offsets(int64(len(buf))) {
		if off >= 0 && off+int64(len(d.magic)) <= int64(len(buf)) {
			copy(buf[off:], d.magic)
			return true
		}
	}
	return false
}

func TestProbeFindsEveryPlantedSignature(t *testing.T) {
	const size = 8 << 20
	for i, d := range magicDefs {
		buf := make([]byte, size)
		if !plant(buf, d) {
			t.Fatalf("def %d (%s) does not fit %d bytes", i, d.typ, size)
		}
		res, err := Probe(bytes.NewReader(buf), size)
		if err != nil {
			t.Fatal(err)
		}
		if res.Blank() {
			t.Errorf("def %d: planted %s (%x) not found", i, d.typ, d.magic)
		}
	}
}

func TestProbeBlankAndNonZero(t *testing.T) {
	for _, tc := range []struct {
		name      string
		size      int
		write     int64 // offset of a stray non-zero byte, -1 for none
		blank, nz bool
	}{
		{"zeros", 4 << 20, -1, true, false},
		{"tiny", 1000, -1, true, false},
		{"empty", 0, -1, true, false},
		{"stray byte in head", 4 << 20, 300 << 10, true, true},
		{"stray byte in tail", 4 << 20, 4<<20 - 5, true, true},
		{"stray byte in the middle", 4 << 20, 2 << 20, true, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			buf := make([]byte, tc.size)
			if tc.write >= 0 {
				buf[tc.write] = 1
			}
			res, err := Probe(bytes.NewReader(buf), int64(tc.size))
			if err != nil {
				t.Fatal(err)
			}
			if res.Blank() != tc.blank || res.NonZero != tc.nz {
				t.Errorf("Blank=%v NonZero=%v, want %v %v (%+v)", res.Blank(), res.NonZero, tc.blank, tc.nz, res.Signatures)
			}
		})
	}
}

func TestProbeReadsXFSAndExtUUID(t *testing.T) {
	buf := make([]byte, 2<<20)
	copy(buf, "XFSB")
	uuid := []byte{0x01, 0x23, 0x45, 0x67, 0x89, 0xab, 0xcd, 0xef, 0x01, 0x23, 0x45, 0x67, 0x89, 0xab, 0xcd, 0xef}
	copy(buf[32:], uuid)
	res, _ := Probe(bytes.NewReader(buf), int64(len(buf)))
	fs, ok := res.Filesystem()
	if !ok || fs.Type != "xfs" || fs.UUID != "01234567-89ab-cdef-0123-456789abcdef" {
		t.Errorf("xfs: %+v", res)
	}
	buf = make([]byte, 2<<20)
	copy(buf[1024+0x38:], []byte{0x53, 0xEF})
	buf[1024+0x60] = 0x40 // extents
	copy(buf[1024+0x68:], uuid)
	res, _ = Probe(bytes.NewReader(buf), int64(len(buf)))
	fs, ok = res.Filesystem()
	if !ok || fs.Type != "ext4" || fs.UUID != "01234567-89ab-cdef-0123-456789abcdef" {
		t.Errorf("ext4: %+v", res)
	}
}

// FuzzProbe: random headers and tails with one planted signature are never
// reported blank, and no input panics the probe.
func FuzzProbe(f *testing.F) {
	f.Add([]byte{}, uint16(0), uint32(0), uint64(1))
	f.Add([]byte("XFSB"), uint16(3), uint32(1<<20), uint64(2))
	f.Add(bytes.Repeat([]byte{0xff}, 600), uint16(40), uint32(7<<20), uint64(3))
	f.Fuzz(func(t *testing.T, head []byte, which uint16, sizeSel uint32, seed uint64) {
		size := int64(sizeSel%(8<<20)) + 1
		buf := make([]byte, size)
		// Random header and tail: the fuzzer's bytes, then seeded noise.
		copy(buf, head)
		rng := rand.New(rand.NewPCG(seed, uint64(sizeSel)))
		for i := len(head); i < len(buf) && i < 70<<10; i++ {
			buf[i] = byte(rng.Uint32())
		}
		for i := max(int64(0), size-(70<<10)); i < size; i++ {
			buf[i] = byte(rng.Uint32())
		}
		if _, err := Probe(bytes.NewReader(buf), size); err != nil {
			t.Fatalf("probe of unplanted data: %v", err)
		}
		d := magicDefs[int(which)%len(magicDefs)]
		if !plant(buf, d) {
			return // the device is too small for this signature
		}
		res, err := Probe(bytes.NewReader(buf), size)
		if err != nil {
			t.Fatal(err)
		}
		if res.Blank() {
			t.Fatalf("planted %s (%x) in a %d-byte device: reported blank", d.typ, d.magic, size)
		}
	})
}
