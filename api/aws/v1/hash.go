package v1

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
)

// Hash hashes the EC2NodeClass spec (JSON, map keys sorted), the inputs
// that shape an instance; a NodeClaim launched under another hash has
// drifted.
func (nc *EC2NodeClass) Hash() string {
	b, err := json.Marshal(nc.Spec)
	if err != nil { // a spec of plain data always marshals
		panic(fmt.Sprintf("marshalling EC2NodeClass spec: %v", err))
	}
	sum := sha256.Sum256(b)
	return hex.EncodeToString(sum[:8])
}
