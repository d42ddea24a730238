package userdata

import (
	"fmt"
	"strings"
)

// Render returns the raw user data for in (not base64 encoded).
func Render(in Input) ([]byte, error) {
	r, err := resolve(in)
	if err != nil {
		return nil, err
	}
	switch r.in.Family {
	case FamilyAL2, FamilyUbuntu:
		return renderAL2(r)
	case FamilyAL2023:
		return renderAL2023(r)
	case FamilyBottlerocket:
		return renderBottlerocket(r)
	case FamilyWindows2019, FamilyWindows2022, FamilyWindows2025:
		return renderWindows(r), nil
	case FamilyCustom:
		return []byte(r.in.UserData), nil
	}
	return nil, fmt.Errorf("%w %q", ErrUnknownFamily, in.Family)
}

// psQuote single-quotes s for PowerShell.
func psQuote(s string) string { return "'" + strings.ReplaceAll(s, "'", "''") + "'" }

// renderWindows renders the PowerShell user data: the user's script first,
// then Start-EKSBootstrap.ps1. <powershell> tags the user wrote around their
// script are removed, since the output has its own.
func renderWindows(r resolved) []byte {
	c := r.in.Cluster
	var b strings.Builder
	b.WriteString("<powershell>\n")
	if u := stripPowershellTags(r.in.UserData); strings.TrimSpace(u) != "" {
		b.WriteString(u)
		if !strings.HasSuffix(u, "\n") {
			b.WriteString("\n")
		}
	}
	b.WriteString(`[string]$EKSBootstrapScriptFile = "$env:ProgramFiles\Amazon\EKS\Start-EKSBootstrap.ps1"` + "\n")
	b.WriteString("& $EKSBootstrapScriptFile -EKSClusterName " + psQuote(c.Name) + " -APIServerEndpoint " + psQuote(c.Endpoint))
	if c.CABundle != "" {
		b.WriteString(" -Base64ClusterCA " + psQuote(c.CABundle))
	}
	b.WriteString(" -KubeletExtraArgs " + psQuote(kubeletExtraArgs(r)))
	if len(r.clusterDNS) > 0 {
		b.WriteString(" -DNSClusterIP " + psQuote(r.clusterDNS[0]))
	}
	b.WriteString("\n</powershell>")
	return []byte(b.String())
}

func stripPowershellTags(s string) string {
	t := strings.TrimSpace(s)
	if strings.HasPrefix(t, "<powershell>") && strings.HasSuffix(t, "</powershell>") {
		t = strings.TrimSuffix(strings.TrimPrefix(t, "<powershell>"), "</powershell>")
		return strings.Trim(t, "\r\n") + "\n"
	}
	return s
}
