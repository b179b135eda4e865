"""What ragaudit decides from the checked runs: the gate (`gating`), comparisons of systems
(`comparison`, `pairing`, `power`, `noise`, `resampling`, `twosample`), agreement with a person's
labels (`agreement`, `labelling`, `labelserver`, `labelfit`) and release attestations (`attest`,
`attestcheck`, `evalresult`)."""
