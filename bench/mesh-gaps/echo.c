/* UDP echo for bench/mesh-gaps.sh: sends every datagram back to where it came from. */
#include <arpa/inet.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/socket.h>

int main(int argc, char **argv) {
  if (argc != 3) { fprintf(stderr, "usage: echo ADDR PORT\n"); return 2; }
  int s = socket(AF_INET, SOCK_DGRAM, 0);
  struct sockaddr_in a = {0};
  a.sin_family = AF_INET;
  a.sin_port = htons(atoi(argv[2]));
  if (inet_pton(AF_INET, argv[1], &a.sin_addr) != 1 || bind(s, (void *)&a, sizeof a)) { perror("bind"); return 1; }
  char b[2048];
  for (;;) {
    struct sockaddr_in f;
    socklen_t fl = sizeof f;
    ssize_t n = recvfrom(s, b, sizeof b, 0, (void *)&f, &fl);
    if (n > 0) sendto(s, b, n, 0, (void *)&f, fl);
  }
}
