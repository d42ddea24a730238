package sim

import (
	"fmt"
	"net/http"
)

// servePricing answers the Pricing JSON API.
func (s *Sim) servePricing(w http.ResponseWriter, target string, body []byte) {
	writeJSONError(w, http.StatusBadRequest, "InvalidParameterException", fmt.Sprintf("operation %s is not simulated", target))
}
