"""caption.date: the DATE caption metric of the MECAT benchmark, on a torch MiniLM encoder."""
