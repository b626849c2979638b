// Filled in with the readers component.
