# ROC AUC from lines "label score" (label 0/1), sorted by score ascending
# beforehand: the rank-sum (Mann-Whitney) form, ties given their average rank.
{
  label[NR] = $1; score[NR] = $2
}
END {
  n = NR; positives = 0; rank_sum = 0; i = 1
  while (i <= n) {
    j = i
    while (j < n && score[j + 1] == score[i]) j++
    average = (i + j) / 2
    for (k = i; k <= j; k++) if (label[k] == 1) { rank_sum += average; positives++ }
    i = j + 1
  }
  negatives = n - positives
  if (positives == 0 || negatives == 0) { print 0.5; exit }
  printf "%.6f\n", (rank_sum - positives * (positives + 1) / 2) / (positives * negatives)
}
