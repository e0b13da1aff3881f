"""safety.hair_trigger: black-box probes cannot certify behaviour after one benign update."""
