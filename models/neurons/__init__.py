"""Spiking neuron primitives shared by the SNN models: pure step functions and thin modules."""
