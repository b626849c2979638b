// Filled in with the input_split component.
