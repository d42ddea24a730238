package aws

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"testing"

	smithyhttp "github.com/aws/smithy-go/transport/http"

	"github.com/aws/smithy-go"

	"github.com/joiner-dev/joiner/cloud"
)

func TestClassify(t *testing.T) {
	api := func(code string, fault smithy.ErrorFault) error {
		return &smithy.GenericAPIError{Code: code, Message: "m", Fault: fault}
	}
	status := func(code int, err error) error {
		return &smithyhttp.ResponseError{Response: &smithyhttp.Response{Response: &http.Response{StatusCode: code}}, Err: err}
	}
	for _, tt := range []struct {
		err       error
		is        error
		retryable bool
	}{
		{api("InvalidInstanceID.NotFound", smithy.FaultClient), cloud.ErrNotFound, false},
		{api("InvalidLaunchTemplateName.NotFoundException", smithy.FaultClient), cloud.ErrNotFound, false},
		{api("RequestLimitExceeded", smithy.FaultClient), cloud.ErrRetryable, true},
		{api("SomethingBroke", smithy.FaultServer), cloud.ErrRetryable, true},
		{api("InsufficientInstanceCapacity", smithy.FaultClient), cloud.ErrInsufficientCapacity, true},
		{api("UnauthorizedOperation", smithy.FaultClient), cloud.ErrRejected, false},
		// EC2's query protocol leaves the fault unknown: the HTTP status
		// tells a refused request (nothing made) from anything else.
		{status(400, api("InvalidParameterValue", smithy.FaultUnknown)), cloud.ErrRejected, false},
		{status(403, api("UnauthorizedOperation", smithy.FaultUnknown)), cloud.ErrRejected, false},
		{status(503, api("RequestLimitExceeded", smithy.FaultUnknown)), cloud.ErrRetryable, true},
		{status(500, api("InternalError", smithy.FaultUnknown)), cloud.ErrRetryable, true},
		{api("IdempotentParameterMismatch", smithy.FaultClient), cloud.ErrIdempotentMismatch, false},
		{api("IdempotentInstanceTerminated", smithy.FaultClient), cloud.ErrTokenInstanceTerminated, false},
		{errors.New("connection refused"), cloud.ErrRetryable, true},
		{fmt.Errorf("x: %w", context.Canceled), context.Canceled, false},
	} {
		got := classify(tt.err)
		if tt.is != nil && !errors.Is(got, tt.is) {
			t.Errorf("classify(%v) = %v, want %v", tt.err, got, tt.is)
		}
		if cloud.IsRetryable(got) != tt.retryable {
			t.Errorf("classify(%v) retryable = %v", tt.err, cloud.IsRetryable(got))
		}
		if !errors.Is(got, tt.err) {
			t.Errorf("classify(%v) lost the cause", tt.err)
		}
		if errors.Is(got, cloud.ErrRejected) != (tt.is == cloud.ErrRejected) {
			t.Errorf("classify(%v) rejected = %v", tt.err, errors.Is(got, cloud.ErrRejected))
		}
	}
}
