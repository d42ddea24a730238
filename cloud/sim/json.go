package sim

import (
	"encoding/json"
	"fmt"
	"net/http"
)

// writeJSONError writes an error of the AWS JSON protocols (SSM, SQS,
// Pricing; EKS's REST-JSON uses the same body).
func writeJSONError(w http.ResponseWriter, status int, typ, msg string) {
	w.Header().Set("X-Amzn-ErrorType", typ)
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(map[string]string{"__type": typ, "message": msg})
}

// decodeJSONCall starts the answer to a call of the AWS JSON 1.1 protocol
// (SSM, Pricing) of which only operation is simulated: it decodes body
// into in, or writes the error (an operation not simulated, a body that is
// not JSON) and returns false.
func decodeJSONCall(w http.ResponseWriter, target, operation string, body []byte, in any) bool {
	w.Header().Set("Content-Type", "application/x-amz-json-1.1")
	if target != operation {
		writeJSONError(w, http.StatusBadRequest, "UnknownOperationException", fmt.Sprintf("operation %s is not simulated", target))
		return false
	}
	if err := json.Unmarshal(body, in); err != nil {
		writeJSONError(w, http.StatusBadRequest, "SerializationException", "the request body is not valid JSON")
		return false
	}
	return true
}
