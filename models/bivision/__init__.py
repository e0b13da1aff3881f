"""event.bivision: STATNF neurons, E2S event-to-spike front end and BiSNet (detection and
classification heads) for event cameras, after "Bio-Vision-Inspired SNNs for Object Detection
with Event Cameras" (ICML 2026; code not public: design decisions are in the module docs)."""
