package sim

import (
	"fmt"
	"net/http"
)

// serveSQS answers the SQS JSON API.
func (s *Sim) serveSQS(w http.ResponseWriter, target string, body []byte) {
	writeJSONError(w, http.StatusBadRequest, "UnsupportedOperation", fmt.Sprintf("operation %s is not simulated", target))
}
