"""physics.meshft: structure-preserving port-Hamiltonian wave physics on meshes (MeshFT-Net)."""
