// Placeholder translation unit; components add their own files here.
