// Filled in with the models component.
